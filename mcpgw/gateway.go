// Package mcpgw is CommitLayer's MCP gateway: an MCP server (Streamable
// HTTP or stdio, on the official go-sdk) in front of an upstream MCP server
// (a command over stdio, or a Streamable HTTP URL). It lists the upstream's
// tools as its own and forwards every call; a call of a tool the tenant's
// contracts bind (contracts.Bindings) is recorded as a CommitLayer action,
// idempotent on the MCP session and the JSON-RPC request id, so the agent
// needs no code to be verified. With Wait it answers the agent only once the
// provisional verdict is in, and tells it in the tool result when the call
// did not verify.
//
// Everything else passes through (passthrough.go): resources, prompts,
// completions, subscriptions, list changes, progress, cancellation and
// logs. A lost upstream session is reconnected (upstream.go); an action
// CommitLayer's API did not take is posted again in the background
// (pending.go); stdio lines that are not JSON-RPC are answered without
// ending the session (stdio.go).
//
// The gateway's CommitLayer key lives in its Recorder and is never sent
// upstream (nor put in the upstream command's environment) nor logged.
package mcpgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
)

// Recorder is what the gateway needs of CommitLayer: the tenant's bindings
// and recording an action (APIRecorder does both through the API).
type Recorder interface {
	Bindings(ctx context.Context) (*contracts.Bindings, error)
	// Record records a, with the Idempotency-Key key; with wait it asks
	// for the provisional verdict within waitTimeout.
	Record(ctx context.Context, a commitlayer.Action, key string, wait bool, waitTimeout time.Duration) (client.Accepted, error)
}

// Upstream says how to reach the upstream MCP server: Command (argv, run
// with stdio) or URL (Streamable HTTP), exactly one.
type Upstream struct {
	Command []string
	URL     string
	// Header is sent on every request to an HTTP upstream (its own auth,
	// from -upstream-header).
	Header http.Header
	// HTTPClient reaches an HTTP upstream; nil means one without a
	// timeout (streams are long-lived), its transport http.DefaultTransport.
	HTTPClient *http.Client
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
	// request to an HTTP upstream on that call (the upstream's own auth
	// passing through the gateway).
	ForwardAuth bool
	// BindingsRefresh is how long fetched bindings are used before they are
	// fetched again (default 30 s).
	BindingsRefresh time.Duration
	Logger          *slog.Logger
	// Version is the gateway's version in its MCP Implementation.
	Version string
	// Now is the clock a call's requested_at is read from (before it is
	// forwarded); nil means time.Now. A gateway in front of systems that
	// keep another clock (the sandbox's virtual one) reads theirs.
	Now func() time.Time
	// RecordTimeout bounds how long an agent's answer waits for
	// CommitLayer to take a bound call's action when it does not wait for
	// the verdict, and beyond WaitTimeout when it does (default 15 s, the
	// budget before there was a default; `commitlayer mcp` gives 5 s); an
	// action the API did not take in time is posted again in the
	// background (pending.go).
	RecordTimeout time.Duration
	// PageSize is how many tools a tools/list page holds (default the
	// SDK's).
	PageSize int
	// SessionIdleTimeout ends a Streamable HTTP session that sent no
	// request for this long (its next request is 404, and the agent
	// initializes again); zero keeps sessions until DELETE.
	SessionIdleTimeout time.Duration
}

// HeaderRequestID carries a tools/call's JSON-RPC id from the transport to
// the tool handler (the SDK does not hand it over); the gateway sets it
// itself and drops any the agent sends.
const HeaderRequestID = "Commitlayer-Jsonrpc-Id"

// envKey is the gateway's key variable, kept out of the upstream command's
// environment.
const envKey = "COMMITLAYER_API_KEY"

const (
	defaultWaitTimeout     = 10 * time.Second
	defaultBindingsRefresh = 30 * time.Second
	defaultRecordTimeout   = 15 * time.Second
	maxClaimMessage        = 2048
	maxKeyLen              = 255
	seenCacheSize          = 16384
)

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
	tools    map[string]bool // the upstream's tools, as served
	done     chan struct{}   // closed by Close
	wg       sync.WaitGroup  // the watcher, reconnect and retry goroutines

	subMu   sync.Mutex
	subOn   *mcp.ClientSession // the upstream session subURIs are subscribed on
	subURIs map[string]bool

	prog progress // progress tokens sent upstream → the agents' (passthrough.go)

	pendMu  sync.Mutex
	pending map[string]*pendingAction // actions CommitLayer has not taken (pending.go)
	kick    chan struct{}

	bindMu     sync.Mutex
	bindings   *contracts.Bindings
	bindAt     time.Time
	refreshing bool

	// seen keeps, per idempotency key, the action first recorded for it:
	// a retried call records the same action again (same body, same key),
	// whatever its own result, so the API answers a replay.
	seen *lru.Cache[string, seenAction]
	// retries keeps, per session and bound match (contract, binding,
	// subject, params), the key of a call that answered an error: the
	// agent's next call of the same match retries that action (retry.go).
	retries *lru.Cache[string, string]
	// began keeps, per session, when the work of its next action began:
	// the time of its first call since the last one recorded.
	began *lru.Cache[string, time.Time]
	// sessions names sessions without a transport id (stdio).
	sessions sync.Map // *mcp.ServerSession → string
}

// seenAction is the action first recorded under a key, and its match's
// fingerprint (contract, binding, subject, params).
type seenAction struct {
	action      commitlayer.Action
	fingerprint string
}

// New connects to the upstream, lists its tools and fetches the bindings.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.Recorder == nil {
		return nil, errors.New("mcp gateway: no recorder")
	}
	if (len(cfg.Upstream.Command) == 0) == (cfg.Upstream.URL == "") {
		return nil, errors.New("mcp gateway: give exactly one upstream: a command or a URL")
	}
	if cfg.PageSize < 0 {
		return nil, fmt.Errorf("mcp gateway: page size %d is negative", cfg.PageSize)
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = defaultWaitTimeout
	}
	if cfg.BindingsRefresh <= 0 {
		cfg.BindingsRefresh = defaultBindingsRefresh
	}
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = defaultRecordTimeout
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, tools: map[string]bool{}, done: make(chan struct{}),
		subURIs: map[string]bool{}, pending: map[string]*pendingAction{},
		kick: make(chan struct{}, 1)}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.seen, _ = lru.New[string, seenAction](seenCacheSize) // size > 0: no error
	g.retries, _ = lru.New[string, string](seenCacheSize)
	g.began, _ = lru.New[string, time.Time](seenCacheSize)
	if g.cfg.Now == nil {
		g.cfg.Now = time.Now
	}
	if g.cfg.Version == "" {
		g.cfg.Version = "dev"
	}
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
	opts := &mcp.ServerOptions{Logger: g.log, Capabilities: g.caps, PageSize: cfg.PageSize}
	if up != nil {
		opts.Instructions = up.Instructions
	}
	if g.caps.Resources != nil && g.caps.Resources.Subscribe {
		opts.SubscribeHandler, opts.UnsubscribeHandler = g.subscribe, g.unsubscribe
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "commitlayer-mcp-gateway", Version: g.cfg.Version}, opts)
	g.server.AddReceivingMiddleware(g.passthrough)
	if err := g.attach(ctx, cs); err != nil {
		return nil, err
	}
	g.wg.Add(1)
	go g.retryLoop()
	return g, nil
}

func (g *Gateway) upstreamName() string {
	if g.cfg.Upstream.URL != "" {
		return redactURL(g.cfg.Upstream.URL)
	}
	return fmt.Sprintf("command %q", g.cfg.Upstream.Command[0])
}

// upstreamEnv is the gateway's environment without its CommitLayer key.
func upstreamEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, envKey+"=")
	})
}

// syncTools lists the upstream's tools and serves them: new and changed
// ones added, vanished ones removed (the SDK tells the agents).
func (g *Gateway) syncTools(ctx context.Context) error {
	cs, err := g.session()
	if err != nil || g.server == nil {
		return err
	}
	var listed []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("mcp gateway: list upstream tools: %w", err)
		}
		listed = append(listed, t)
	}
	g.upMu.Lock()
	defer g.upMu.Unlock()
	now := map[string]bool{}
	for _, t := range listed {
		if err := g.addTool(t); err != nil {
			g.log.WarnContext(ctx, "mcp gateway: upstream tool not served", "tool", t.Name, "error", err)
			continue
		}
		now[t.Name] = true
	}
	var gone []string
	for name := range g.tools {
		if !now[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	g.tools = now
	return nil
}

// addTool serves an upstream tool as it is; a tool the SDK refuses (no
// input schema, not an object) is reported, never a crash.
func (g *Gateway) addTool(t *mcp.Tool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	tool := *t
	if tool.InputSchema == nil {
		return errors.New("no input schema")
	}
	name := t.Name
	g.server.AddTool(&tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return g.callTool(ctx, name, req), nil
	})
	return nil
}

// Server is the gateway's MCP server (for transports of the caller's own).
func (g *Gateway) Server() *mcp.Server { return g.server }

// Close ends the upstream session (and the upstream command), and makes a
// last attempt at the actions CommitLayer has not taken yet.
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

// toolError is a tool result saying the call failed.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// callTool forwards one call upstream and records it when bound. Whatever
// the upstream answers (an error, nothing, a panic in here), the agent gets
// a tool result; once the upstream has answered, its answer (a panic while
// recording must not turn a refund that happened into a failed call).
func (g *Gateway) callTool(ctx context.Context, name string, req *mcp.CallToolRequest) (res *mcp.CallToolResult) {
	defer func() {
		if r := recover(); r != nil {
			g.log.ErrorContext(ctx, "mcp gateway: call failed inside the gateway", "tool", name, "panic", fmt.Sprint(r))
			if res == nil {
				res = toolError("the CommitLayer gateway failed on this call of %s", name)
			}
		}
	}()
	// The action's work began at the session's first call since its last
	// recorded one (retry.go).
	requestedAt := g.workBegan(g.sessionID(req.Session), g.cfg.Now().UTC())
	var rawArgs json.RawMessage
	var meta mcp.Meta
	if req.Params != nil {
		rawArgs, meta = req.Params.Arguments, req.Params.Meta
	}
	reqID := ""
	if req.Extra != nil {
		reqID = req.Extra.Header.Get(HeaderRequestID)
	}
	if v, ok := meta[metaRequestID]; ok { // the gateway's own (tagBatchCalls): never forwarded
		if s, ok := v.(string); ok && reqID == "" {
			reqID = s
		}
		meta = maps.Clone(meta)
		delete(meta, metaRequestID)
	}
	params := &mcp.CallToolParams{Meta: meta, Name: name}
	if len(rawArgs) > 0 {
		params.Arguments = rawArgs
	}
	params, progressDone := withProgress(g, ctx, req.Session, params)
	defer progressDone()
	uctx := ctx
	if g.cfg.ForwardAuth && req.Extra != nil {
		if v := req.Extra.Header.Get("Authorization"); v != "" {
			uctx = context.WithValue(ctx, authKey{}, v)
		}
	}
	cs, err := g.session()
	if err == nil {
		res, err = cs.CallTool(uctx, params)
		if err != nil {
			g.failed(cs, err)
		}
	}
	err = g.scrub(err)
	switch {
	case err != nil && ctx.Err() != nil:
		// The agent cancelled the call (notifications/cancelled): the SDK
		// sends it no answer, and the upstream was told to stop.
		res = toolError("the call was cancelled before the upstream MCP server answered")
	case err != nil:
		g.log.WarnContext(ctx, "mcp gateway: upstream call failed", "tool", name, "error", err)
		res = toolError("upstream MCP server: %v", err)
	case res == nil:
		res = toolError("upstream MCP server answered no result")
	}
	if b := g.currentBindings(ctx); b.Bound(name) {
		res.Content = append(res.Content, g.record(ctx, name, req, reqID, rawArgs, res, requestedAt, b)...)
	}
	return res
}

// currentBindings returns the bindings, fetched again once they are older
// than BindingsRefresh. One call fetches while the others go on with the
// last ones; a failed fetch keeps them too.
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
