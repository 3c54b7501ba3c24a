//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 only; agents on 2025-06-18 and 2025-11-25 use it

package mcpgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errUpstreamDown is what a call meets while the upstream session is gone
// and the gateway is connecting again.
var errUpstreamDown = errors.New("the upstream MCP server is not connected (the gateway is reconnecting)")

const (
	reconnectMin = 250 * time.Millisecond
	reconnectMax = 10 * time.Second
)

// dial starts an upstream session (the command or the URL), its answers
// read through the guard and its notifications relayed to the agents.
func (g *Gateway) dial(ctx context.Context) (*mcp.ClientSession, error) {
	var t mcp.Transport
	up := g.cfg.Upstream
	if len(up.Command) > 0 {
		t = &commandTransport{g: g, argv: up.Command}
	} else {
		u, err := url.Parse(up.URL)
		if err != nil {
			return nil, fmt.Errorf("mcp gateway: upstream URL %s: %w", redactURL(up.URL), err)
		}
		hc := &http.Client{Transport: &upstreamTransport{g: g, base: http.DefaultTransport, origin: originOf(u), header: up.Header.Clone()},
			CheckRedirect: checkRedirect}
		t = &mcp.StreamableClientTransport{Endpoint: up.URL, HTTPClient: hc, MaxEventSize: g.cfg.MaxMessage + 1024}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "commitlayer-mcp-gateway", Version: g.cfg.Version},
		&mcp.ClientOptions{
			Logger: g.log,
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				g.notifyListChanged("notifications/tools/list_changed")
			},
			PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
				g.notifyListChanged("notifications/prompts/list_changed")
			},
			ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
				g.notifyListChanged("notifications/resources/list_changed")
			},
			ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				if s := g.server; s != nil && req.Params != nil {
					_ = s.ResourceUpdated(ctx, req.Params)
				}
			},
			LoggingMessageHandler: g.relayLog,
		})
	cs, err := c.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: agentVersions[0]})
	if err != nil {
		return nil, fmt.Errorf("mcp gateway: connect to upstream %s: %w", g.upstreamName(), g.scrub(err))
	}
	return cs, nil
}

// attach makes cs the upstream session and reconnects when it ends.
func (g *Gateway) attach(ctx context.Context, cs *mcp.ClientSession) {
	g.upMu.Lock()
	g.upstream, g.upErr = cs, nil
	g.upMu.Unlock()
	if up := cs.InitializeResult(); up != nil && up.Capabilities != nil && up.Capabilities.Logging != nil {
		// Every message comes to the gateway; each agent session gets
		// those at or above the level it set (relayLog).
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			g.log.DebugContext(ctx, "mcp gateway: upstream logging level", "error", err)
		}
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		err := cs.Wait()
		g.lost(cs, err)
	}()
}

// session is the current upstream session, or errUpstreamDown.
func (g *Gateway) session() (*mcp.ClientSession, error) {
	g.upMu.Lock()
	defer g.upMu.Unlock()
	if g.upstream == nil {
		if g.upErr != nil {
			return nil, fmt.Errorf("%w: %v", errUpstreamDown, g.upErr)
		}
		return nil, errUpstreamDown
	}
	return g.upstream, nil
}

// lost is told that cs failed or ended; unless the gateway is closing, it
// drops cs and reconnects in the background (once per session lost).
func (g *Gateway) lost(cs *mcp.ClientSession, err error) {
	err = g.scrub(err)
	g.upMu.Lock()
	if g.closed || g.upstream != cs {
		g.upMu.Unlock()
		return
	}
	g.upstream = nil
	g.upErr = err
	if err == nil {
		g.upErr = errors.New("the upstream session ended")
	}
	g.upMu.Unlock()
	_ = cs.Close()
	g.log.Warn("mcp gateway: upstream session lost; reconnecting", "upstream", g.upstreamName(), "error", err)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.reconnect()
	}()
}

// reconnect dials the upstream until it answers or the gateway closes.
func (g *Gateway) reconnect() {
	wait := reconnectMin
	for {
		select {
		case <-g.done:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, err := g.dial(ctx)
		if err == nil {
			g.attach(ctx, cs)
			g.log.Info("mcp gateway: upstream reconnected", "upstream", g.upstreamName())
			g.resubscribe(ctx, cs)
		}
		cancel()
		if err == nil {
			// What it serves may have changed while it was away.
			for _, k := range []string{"tools", "prompts", "resources"} {
				g.notifyListChanged("notifications/" + k + "/list_changed")
			}
			return
		}
		g.upMu.Lock()
		g.upErr = err
		closed := g.closed
		g.upMu.Unlock()
		if closed {
			return
		}
		g.log.Warn("mcp gateway: reconnect to upstream", "upstream", g.upstreamName(), "error", err, "retry_in", wait)
		wait = min(wait*2, reconnectMax)
	}
}

// failed tells whether err from a call on cs means the session is gone
// (then the gateway reconnects for the next calls).
func (g *Gateway) failed(cs *mcp.ClientSession, err error) {
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) {
		g.lost(cs, err)
	}
}

// serverCapabilities are what the gateway tells agents it serves: tools,
// logging, and what the upstream has of the rest.
func serverCapabilities(up *mcp.InitializeResult) *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	caps.Logging = &mcp.LoggingCapabilities{}
	if up == nil || up.Capabilities == nil {
		return caps
	}
	uc := up.Capabilities
	if uc.Prompts != nil {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	}
	if uc.Resources != nil {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: uc.Resources.Subscribe}
	}
	if uc.Completions != nil {
		caps.Completions = &mcp.CompletionCapabilities{}
	}
	return caps
}

// scrub writes the upstream URL in err's message without its user info
// and query (they may hold the upstream's secrets), for logs and for the
// agent's tool results.
func (g *Gateway) scrub(err error) error {
	u := g.cfg.Upstream.URL
	if err == nil || u == "" {
		return err
	}
	r := redactURL(u)
	if r == u || !strings.Contains(err.Error(), u) {
		return err
	}
	return scrubbed{msg: strings.ReplaceAll(err.Error(), u, r), err: err}
}

// scrubbed is an error whose message hides the upstream URL's secrets;
// errors.Is and As still see the error it stands for.
type scrubbed struct {
	msg string
	err error
}

func (s scrubbed) Error() string { return s.msg }
func (s scrubbed) Unwrap() error { return s.err }
