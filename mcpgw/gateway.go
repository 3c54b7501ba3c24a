// Package mcpgw is CommitLayer's MCP gateway: an MCP server (Streamable
// HTTP or stdio, on the official go-sdk) in front of an upstream MCP server
// (a command over stdio, or a Streamable HTTP URL). It forwards every
// request and answers with the upstream's JSON as sent; a call of a tool
// the tenant's contracts bind is recorded as a CommitLayer action through
// the one tool-call recorder (service.ToolCalls), so the agent needs no
// code to be verified. With Wait it answers the agent only once the
// provisional verdict is in, and tells it in the tool result when the call
// did not verify.
package mcpgw

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/service"
)

// Recorder is what the gateway needs of CommitLayer (APIRecorder does it
// through the API).
type Recorder interface {
	Bindings(ctx context.Context) (*contracts.Bindings, error)
	// Record records a, with the Idempotency-Key key; with wait it asks
	// for the provisional verdict within waitTimeout.
	Record(ctx context.Context, a commitlayer.Action, key string, wait bool, waitTimeout time.Duration) (client.Accepted, error)
	// RecordAttempt records a retry on action actionID under its own key;
	// with wait it asks for the verdict of a pass that began after it.
	RecordAttempt(ctx context.Context, actionID, key string, claim commitlayer.Claim, entry json.RawMessage,
		wait bool, waitTimeout time.Duration) (client.Accepted, error)
}

// Upstream says how to reach the upstream MCP server: Command (argv, run
// with stdio) or URL (Streamable HTTP), exactly one.
type Upstream struct {
	Command []string
	URL     string
	// Header is sent on every request to an HTTP upstream's origin (its
	// own auth, from -upstream-header).
	Header http.Header
}

// Config configures a Gateway.
type Config struct {
	Upstream Upstream
	Recorder Recorder
	// Agent names the agent in recorded actions; "" means the MCP client's
	// name (InitializeParams.ClientInfo), "mcp-client" when it gives none.
	Agent string
	// Wait answers a bound call only once its provisional verdict is in
	// (or WaitTimeout passed, default 10 s), adding a text block to the
	// result when the verdict is FAIL.
	Wait        bool
	WaitTimeout time.Duration
	// ForwardAuth forwards the Authorization header of an agent's HTTP
	// request to an HTTP upstream on that call.
	ForwardAuth bool
	// BindingsRefresh is how long fetched bindings are used before they are
	// fetched again (default 30 s).
	BindingsRefresh time.Duration
	Logger          *slog.Logger
	// Version is the gateway's version in its MCP Implementation.
	Version string
	// Now is the clock a call's requested_at is read from (before it is
	// forwarded); nil means time.Now.
	Now func() time.Time
	// RecordTimeout bounds how long an agent's answer waits for
	// CommitLayer to take a bound call's action (beyond WaitTimeout with
	// Wait; default 15 s); then it is posted again in the background.
	RecordTimeout time.Duration
	// CallTimeout bounds each request forwarded upstream (default 60 s):
	// then the agent is answered with an error naming it, and the upstream
	// is sent notifications/cancelled.
	CallTimeout time.Duration
	// MaxMessage bounds one message from the upstream: a result, an SSE
	// event, a stdio line (default 8 MiB). MaxListPages and MaxListBytes
	// bound one listing an agent pages through (defaults 1000 pages,
	// 64 MiB).
	MaxMessage                 int
	MaxListPages, MaxListBytes int
	// SessionIdleTimeout ends a Streamable HTTP session that sent no
	// request for this long; zero keeps sessions until DELETE.
	SessionIdleTimeout time.Duration
}

// HeaderRequestID carries a tools/call's JSON-RPC id from the transport to
// the tool handler (the SDK does not hand it over); the gateway sets it
// itself and drops any the agent sends.
const HeaderRequestID = "Commitlayer-Jsonrpc-Id"

// envKey is the gateway's key variable, kept out of the upstream command's
// environment.
const envKey = "COMMITLAYER_API_KEY"

// Defaults.
const (
	defaultWaitTimeout     = 10 * time.Second
	defaultBindingsRefresh = 30 * time.Second
	defaultRecordTimeout   = 15 * time.Second
	DefaultCallTimeout     = 60 * time.Second
	DefaultMaxMessage      = 8 << 20
	defaultMaxListPages    = 1000
	defaultMaxListBytes    = 64 << 20
)

// agentVersions are the protocol versions the gateway speaks to agents:
// the stateful ones its upstream session speaks (2026-07-28 clients fall
// back to initialize).
var agentVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Gateway is a running gateway: its MCP server and its upstream session.
type Gateway struct {
	cfg    Config
	log    *slog.Logger
	server *mcp.Server

	caps *mcp.ServerCapabilities // what the gateway serves (upstream.go)

	upMu     sync.Mutex
	upstream *mcp.ClientSession // nil while reconnecting
	upErr    error              // why the last session ended or dial failed
	closed   bool
	done     chan struct{}  // closed by Close
	wg       sync.WaitGroup // the watcher, reconnect and retry goroutines

	subMu   sync.Mutex
	subURIs map[string]bool // resources agents subscribed to

	progNext   atomic.Uint64              // the last progress token sent upstream (forward.go)
	progRoutes sync.Map                   // progress token sent upstream → progressRoute
	listings   *lru.Cache[string, [2]int] // pages and bytes of each listing in course (forward.go)

	pendMu    sync.Mutex
	pending   map[string]*owed // records CommitLayer has not taken (pending.go)
	pendBytes int
	kick      chan struct{}

	bindMu     sync.Mutex
	bindings   *contracts.Bindings
	bindAt     time.Time
	refreshing bool

	calls    *service.ToolCalls // chains, work began, keys (record.go)
	sessions sync.Map           // *mcp.ServerSession → id, for sessions without a transport id (stdio)
}

// New connects to the upstream and fetches the bindings.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.Recorder == nil {
		return nil, errors.New("mcp gateway: no recorder")
	}
	if (len(cfg.Upstream.Command) == 0) == (cfg.Upstream.URL == "") {
		return nil, errors.New("mcp gateway: give exactly one upstream: a command or a URL")
	}
	orDefault(&cfg.WaitTimeout, defaultWaitTimeout)
	orDefault(&cfg.BindingsRefresh, defaultBindingsRefresh)
	orDefault(&cfg.RecordTimeout, defaultRecordTimeout)
	orDefault(&cfg.CallTimeout, DefaultCallTimeout)
	orDefault(&cfg.MaxMessage, DefaultMaxMessage)
	orDefault(&cfg.MaxListPages, defaultMaxListPages)
	orDefault(&cfg.MaxListBytes, defaultMaxListBytes)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Version = cmp.Or(cfg.Version, "dev")
	g := &Gateway{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), subURIs: map[string]bool{},
		pending: map[string]*owed{}, kick: make(chan struct{}, 1), calls: service.NewToolCalls(0, 0)}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.listings, _ = lru.New[string, [2]int](4096) // size > 0: no error
	b, err := cfg.Recorder.Bindings(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp gateway: fetch bindings: %w", err)
	}
	g.bindings, g.bindAt = b, time.Now()
	cs, err := g.dial(ctx)
	if err != nil {
		return nil, err
	}
	up := cs.InitializeResult()
	g.caps = serverCapabilities(up)
	opts := &mcp.ServerOptions{Logger: g.log, Capabilities: g.caps, SupportedProtocolVersions: agentVersions}
	if up != nil {
		opts.Instructions = up.Instructions
	}
	if g.caps.Resources != nil && g.caps.Resources.Subscribe {
		opts.SubscribeHandler, opts.UnsubscribeHandler = g.subscribe, g.unsubscribe
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "commitlayer-mcp-gateway", Version: g.cfg.Version}, opts)
	g.server.AddReceivingMiddleware(g.forward)
	g.attach(ctx, cs)
	g.wg.Add(1)
	go g.retryLoop()
	return g, nil
}

// orDefault sets *v to def when it is not positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

func (g *Gateway) upstreamName() string {
	if g.cfg.Upstream.URL != "" {
		return redactURL(g.cfg.Upstream.URL)
	}
	return fmt.Sprintf("command %q", g.cfg.Upstream.Command[0])
}

// Close ends the upstream session (and the upstream command), and makes a
// last attempt at the records CommitLayer has not taken yet.
func (g *Gateway) Close() error {
	g.upMu.Lock()
	if g.closed {
		g.upMu.Unlock()
		return nil
	}
	g.closed = true
	cs := g.upstream
	g.upstream = nil
	g.upMu.Unlock()
	close(g.done)
	var err error
	if cs != nil {
		err = cs.Close()
	}
	g.wg.Wait()
	return err
}

// currentBindings returns the bindings, fetched again once they are older
// than BindingsRefresh by one call while the others (and a failed fetch)
// keep the last ones.
func (g *Gateway) currentBindings(ctx context.Context) *contracts.Bindings {
	g.bindMu.Lock()
	current := g.bindings
	if g.refreshing || time.Since(g.bindAt) < g.cfg.BindingsRefresh {
		g.bindMu.Unlock()
		return current
	}
	g.refreshing = true
	g.bindMu.Unlock()

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	b, err := g.cfg.Recorder.Bindings(fctx)
	cancel()
	g.bindMu.Lock()
	defer g.bindMu.Unlock()
	g.refreshing, g.bindAt = false, time.Now()
	if err != nil {
		g.log.WarnContext(ctx, "mcp gateway: refresh bindings; keeping the last ones", "error", err)
		return current
	}
	g.bindings = b
	return b
}

// sessionID is the session's transport id (Mcp-Session-Id), or a random
// id the gateway gives a session that has none (stdio).
func (g *Gateway) sessionID(ss *mcp.ServerSession) string {
	if ss == nil {
		return "none"
	}
	if id := ss.ID(); id != "" {
		return id
	}
	if v, ok := g.sessions.Load(ss); ok {
		return v.(string)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	v, _ := g.sessions.LoadOrStore(ss, "local-"+hex.EncodeToString(b[:]))
	return v.(string)
}

func (g *Gateway) agentName(ss *mcp.ServerSession) string {
	if g.cfg.Agent != "" {
		return g.cfg.Agent
	}
	if ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			return p.ClientInfo.Name
		}
	}
	return "mcp-client"
}
