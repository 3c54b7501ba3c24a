//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 only; agents on 2025-06-18 and 2025-11-25 use it

package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Everything that is not a tool call goes to the upstream as the agent
// sent it and comes back as the upstream answered: resources (list,
// templates, read, subscribe), prompts (list, get) and completions, with
// the upstream's own pagination cursors, _meta and errors (code, message,
// data). The gateway answers ping, initialize and logging/setLevel itself,
// as any MCP server does for its own session.

// passthrough is the receiving middleware that forwards those methods.
func (g *Gateway) passthrough(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "resources/list", "resources/templates/list", "resources/read",
			"prompts/list", "prompts/get", "completion/complete":
		default:
			return next(ctx, method, req)
		}
		cs, err := g.session()
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		var res mcp.Result
		switch p := req.GetParams().(type) {
		case *mcp.ListResourcesParams:
			p, done := withProgress(g, ctx, ss, p)
			defer done()
			res, err = cs.ListResources(ctx, p)
		case *mcp.ListResourceTemplatesParams:
			p, done := withProgress(g, ctx, ss, p)
			defer done()
			res, err = cs.ListResourceTemplates(ctx, p)
		case *mcp.ReadResourceParams:
			p, done := withProgress(g, ctx, ss, p)
			defer done()
			res, err = cs.ReadResource(ctx, p)
		case *mcp.ListPromptsParams:
			p, done := withProgress(g, ctx, ss, p)
			defer done()
			res, err = cs.ListPrompts(ctx, p)
		case *mcp.GetPromptParams:
			p, done := withProgress(g, ctx, ss, p)
			defer done()
			res, err = cs.GetPrompt(ctx, p)
		case *mcp.CompleteParams:
			p, done := withProgress(g, ctx, ss, p)
			defer done()
			res, err = cs.Complete(ctx, p)
		default:
			return next(ctx, method, req)
		}
		if err != nil {
			g.failed(cs, err)
			return nil, upstreamError(method, g.scrub(err))
		}
		return res, nil
	}
}

// upstreamError is the error the agent gets for a request the upstream
// refused or could not answer: the upstream's own JSON-RPC error as it
// was, else an internal error naming what happened.
func upstreamError(method string, err error) error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream MCP server, %s: %v", method, err)}
}

// subscribe forwards an agent's resources/subscribe once per URI and
// upstream session (resubscribe does it again on a new one); the SDK
// keeps which agent sessions want which URI and tells them of updates
// (ResourceUpdatedHandler). Unsubscribing is the SDK's alone: the upstream
// keeps sending updates nobody is told of, which costs nothing.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	if req.Params == nil || req.Params.URI == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "resources/subscribe needs a uri"}
	}
	cs, err := g.session()
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	g.subMu.Lock()
	done := g.subOn == cs && g.subURIs[req.Params.URI]
	g.subMu.Unlock()
	if done {
		return nil
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: req.Params.URI}); err != nil {
		g.failed(cs, err)
		return upstreamError("resources/subscribe", g.scrub(err))
	}
	g.subMu.Lock()
	if g.subOn != cs {
		g.subOn = cs
		clear(g.subURIs)
	}
	g.subURIs[req.Params.URI] = true
	g.subMu.Unlock()
	return nil
}

// resubscribe subscribes a new upstream session to the URIs agents
// subscribed to on the last one.
func (g *Gateway) resubscribe(ctx context.Context, cs *mcp.ClientSession) {
	g.subMu.Lock()
	uris := slices.Collect(maps.Keys(g.subURIs))
	g.subOn = cs
	clear(g.subURIs)
	g.subMu.Unlock()
	for _, uri := range uris {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			g.log.WarnContext(ctx, "mcp gateway: subscribe again upstream", "uri", uri, "error", err)
			continue
		}
		g.subMu.Lock()
		if g.subOn == cs {
			g.subURIs[uri] = true
		}
		g.subMu.Unlock()
	}
}

func (g *Gateway) unsubscribe(context.Context, *mcp.UnsubscribeRequest) error { return nil }

// listKind names a list the gateway forwards, for its list_changed.
type listKind int

const (
	listPrompts listKind = iota
	listResources
)

// notifyListChanged tells every agent session that the upstream's prompts
// or resources changed. The SDK sends notifications/*/list_changed when its
// own registry changes; the gateway forwards the lists themselves, so it
// changes the registry by adding and removing a placeholder nobody sees
// (the middleware answers the lists), and the SDK's debounce sends one
// notification.
func (g *Gateway) notifyListChanged(k listKind) {
	s := g.server
	if s == nil {
		return
	}
	switch k {
	case listPrompts:
		if g.caps.Prompts == nil {
			return
		}
		const name = "commitlayer-gateway-placeholder"
		s.AddPrompt(&mcp.Prompt{Name: name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, errors.New("not served")
		})
		s.RemovePrompts(name)
	case listResources:
		if g.caps.Resources == nil {
			return
		}
		const uri = "commitlayer-gateway:placeholder"
		s.AddResource(&mcp.Resource{URI: uri, Name: "placeholder"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, errors.New("not served")
		})
		s.RemoveResources(uri)
	}
}

// progressRoute is where an upstream's progress for one forwarded request
// goes: the agent's session, its own token, and the context of its
// request (so the SDK sends the notification on that request's stream).
type progressRoute struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any
}

// progress maps the tokens the gateway sends upstream to the agents'.
// Agents pick their tokens (two may pick the same) and share one upstream
// session, so each forwarded request carries a token of the gateway's.
type progress struct {
	next   atomic.Uint64
	routes sync.Map // string → progressRoute
}

// paramsWithMeta is a request's params whose _meta the gateway reads and
// rewrites.
type paramsWithMeta interface {
	GetMeta() map[string]any
	SetMeta(map[string]any)
}

// withProgress returns p to send upstream: a copy with the gateway's own
// progress token when the agent asked for progress, and a func that ends
// the route once the request is answered.
func withProgress[P interface {
	*T
	paramsWithMeta
}, T any](g *Gateway, ctx context.Context, ss *mcp.ServerSession, p P) (P, func()) {
	if p == nil || ss == nil {
		return p, func() {}
	}
	meta := p.GetMeta()
	token, ok := meta[progressTokenKey]
	if !ok || token == nil {
		return p, func() {}
	}
	id := "clgw-" + strconv.FormatUint(g.prog.next.Add(1), 10)
	g.prog.routes.Store(id, progressRoute{ctx: ctx, ss: ss, token: token})
	cp := *p
	out := P(&cp)
	m := make(map[string]any, len(meta))
	for k, v := range meta {
		m[k] = v
	}
	m[progressTokenKey] = id
	out.SetMeta(m)
	return out, func() { g.prog.routes.Delete(id) }
}

const progressTokenKey = "progressToken"

// progressTransport relays a command upstream's progress notifications as
// the gateway reads them: the SDK's client hands a response to its caller
// as soon as it is read but queues notifications for a handler goroutine,
// so a relay from ClientOptions.ProgressNotificationHandler could come
// after the agent's request was answered (and its stream closed). An HTTP
// upstream's are relayed as its SSE bodies are read (sseRelay): wrapping
// the Streamable HTTP connection would hide methods the SDK needs of it.
type progressTransport struct {
	inner mcp.Transport
	g     *Gateway
}

func (t *progressTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &progressConn{Connection: c, g: t.g}, nil
}

type progressConn struct {
	mcp.Connection
	g *Gateway
}

func (c *progressConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && req.Method == "notifications/progress" && c.g.relayProgress(ctx, req.Params) {
			continue
		}
		return msg, nil
	}
}

// relayProgress sends the upstream's progress on a forwarded request to the
// agent that asked for it, with the agent's token; false when the token is
// none of the gateway's.
func (g *Gateway) relayProgress(_ context.Context, raw json.RawMessage) bool {
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(raw, &p) != nil {
		return false
	}
	id, _ := p.ProgressToken.(string)
	v, ok := g.prog.routes.Load(id)
	if !ok {
		return false
	}
	r := v.(progressRoute)
	p.ProgressToken = r.token
	if err := r.ss.NotifyProgress(r.ctx, &p); err != nil {
		g.log.Debug("mcp gateway: relay progress", "error", err)
	}
	return true
}

// relayLog sends the upstream's log messages to every agent session (each
// at the level it set with logging/setLevel; none before it sets one).
func (g *Gateway) relayLog(ctx context.Context, req *mcp.LoggingMessageRequest) {
	s := g.server
	if s == nil || req.Params == nil {
		return
	}
	for ss := range s.Sessions() {
		_ = ss.Log(ctx, req.Params)
	}
}
