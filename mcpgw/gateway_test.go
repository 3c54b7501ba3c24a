package mcpgw_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/mcpgw"
)

// The gateway's tests drive it with the go-sdk's own client, in front of a
// stdio upstream (this test binary, re-run as an MCP server) and an HTTP
// upstream (httptest and mcp.NewStreamableHTTPHandler).

const upstreamEnv = "MCPGW_TEST_UPSTREAM"

// testKey is the gateway's CommitLayer key in these tests: it must never
// reach the upstream, the logs or a result.
const testKey = "cl_test_secret_key_4f1c9e"

// helpers are roles this test binary plays in other processes, named by
// its first argument.
var helpers = map[string]func(){}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if h, ok := helpers[os.Args[1]]; ok {
			h()
			os.Exit(0)
		}
	}
	if os.Getenv(upstreamEnv) == "1" {
		s := upstreamServer(nil)
		s.AddTool(&mcp.Tool{Name: "crash", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				os.Exit(3) // the upstream process dies mid-call
				return nil, nil
			})
		s.AddTool(&mcp.Tool{Name: "progress", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				tok := req.Params.GetProgressToken()
				for i := 1; i <= 3 && tok != nil; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("token=%v", tok)}}}, nil
			})
		s.AddTool(&mcp.Tool{Name: "huge", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("h", 128<<10)}}}, nil
			})
		s.AddTool(&mcp.Tool{Name: "garbage", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				_, _ = os.Stdout.WriteString("{\"jsonrpc\":\"2.0\",\"result\":{\"content\":[\n" + strings.Repeat("g", 200<<10) + "\n")
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "after the garbage"}}}, nil
			})
		err := s.Run(context.Background(), &mcp.StdioTransport{})
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "upstream:", err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var objectSchema = json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"integer"},"currency":{"type":"string"}}}`)

// upstreamServer is the upstream MCP server: refund (bound in the tests),
// get_order (unbound), env (reports the key variable it sees), broken (a
// protocol error). calls, when set, counts refund calls.
func upstreamServer(calls *callCounter) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	var flakyMu sync.Mutex
	flaky := 0 // calls of order o_flaky: the first times out
	s.AddTool(&mcp.Tool{Name: "refund", Description: "refund an order", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				OrderID string `json:"order_id"`
				Amount  int64  `json:"amount"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &a)
			if calls != nil {
				calls.add()
			}
			if a.Amount <= 0 {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "amount must be positive"}}}, nil
			}
			if a.OrderID == "o_flaky" {
				flakyMu.Lock()
				flaky++
				first := flaky == 1
				flakyMu.Unlock()
				if first {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "timeout: no answer"}}}, nil
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf(`{"refund_id":"re_%s","status":"succeeded"}`, a.OrderID)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "get_order", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"paid"}`}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "env", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "key=" + os.Getenv("COMMITLAYER_API_KEY")}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "echo_meta", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b, _ := json.Marshal(req.Params.Meta)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "meta=" + string(b)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "broken", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("database on fire")
		})
	return s
}

type callCounter struct {
	mu sync.Mutex
	n  int
}

func (c *callCounter) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *callCounter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

const boundContract = `id: refund_customer
subject: order
settlement: 10m
sources: [payments]
effects:
  - id: refund
    source: payments
    type: refund_created
bindings:
  - tool: refund
    subject: "'order:' + args.order_id"
    params: {amount: args.amount, currency: args.currency}
  - tool: refund
    subject: "'order:' + args.order_id"
    params: {refund_id: result.refund_id}
    when: has(result.refund_id)
`

// fakeRecorder keeps recorded actions in memory with the API's
// idempotency: the same key with the same action is a replay, with
// another a conflict.
type fakeRecorder struct {
	bindings *contracts.Bindings
	verdict  *commitlayer.Verdict

	mu       sync.Mutex
	fetches  int
	fetchErr error
	byKey    map[string]string // key → action id
	bodies   map[string]string // key → action JSON
	actions  []commitlayer.Action
	attempts map[string]string // attempt key → action id
	waits    int
	refuse   error // answered to every Record when set
}

func newFakeRecorder(t testing.TB) *fakeRecorder {
	c, err := contracts.Parse([]byte(boundContract))
	require.NoError(t, err)
	return &fakeRecorder{bindings: contracts.NewBindings([]*contracts.Contract{c}), byKey: map[string]string{}, bodies: map[string]string{}}
}

func (f *fakeRecorder) Bindings(context.Context) (*contracts.Bindings, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches++
	if f.fetchErr != nil {
		return nil, f.fetchErr
	}
	return f.bindings, nil
}

func (f *fakeRecorder) setBindings(b *contracts.Bindings, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bindings, f.fetchErr = b, err
}

func (f *fakeRecorder) Record(_ context.Context, a commitlayer.Action, key string, wait bool, _ time.Duration) (client.Accepted, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := json.Marshal(a)
	if wait {
		f.waits++
	}
	if f.refuse != nil {
		return client.Accepted{}, f.refuse
	}
	if id, ok := f.byKey[key]; ok {
		if f.bodies[key] != string(body) {
			return client.Accepted{}, errors.New("409 idempotency_conflict")
		}
		return client.Accepted{ID: id, Replayed: true, Verdict: f.verdict}, nil
	}
	id := a.ID
	if id == "" {
		id = fmt.Sprintf("act_%d", len(f.actions)+1)
	}
	f.byKey[key], f.bodies[key] = id, string(body)
	f.actions = append(f.actions, a)
	return client.Accepted{ID: id, Verdict: f.verdict}, nil
}

// RecordAttempt keeps the attempt once per key and sets the claim of the
// action it names (404 when there is none).
func (f *fakeRecorder) RecordAttempt(_ context.Context, actionID, key string, claim commitlayer.Claim, _ json.RawMessage,
	_ bool, _ time.Duration) (client.Accepted, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.actions {
		if f.actions[i].ID != actionID {
			continue
		}
		if f.attempts == nil {
			f.attempts = map[string]string{}
		}
		if _, ok := f.attempts[key]; ok {
			return client.Accepted{ID: actionID, Replayed: true, Verdict: f.verdict}, nil
		}
		f.attempts[key] = actionID
		f.actions[i].Claim = claim
		return client.Accepted{ID: actionID, Verdict: f.verdict}, nil
	}
	return client.Accepted{}, &client.APIError{StatusCode: http.StatusNotFound, Message: "no action"}
}

func (f *fakeRecorder) recorded() ([]commitlayer.Action, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.byKey {
		keys = append(keys, k)
	}
	return append([]commitlayer.Action(nil), f.actions...), keys
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newGateway(t *testing.T, cfg mcpgw.Config, logs io.Writer) *mcpgw.Gateway {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := mcpgw.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// agentSession connects the go-sdk's client to the gateway over HTTP.
func agentSession(t *testing.T, url, name string, header http.Header) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{header: header}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type headerRT struct{ header http.Header }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func text(t testing.TB, res *mcp.CallToolResult) []string {
	t.Helper()
	var out []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		require.True(t, ok, "content %T", c)
		out = append(out, tc.Text)
	}
	return out
}

func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestGatewayStdioUpstream: the gateway runs the upstream as a command,
// lists its tools as its own, forwards calls, records the bound ones (one
// action per matching binding, agent from the client's name, claim from
// the result) and keeps its key out of the upstream's environment.
func TestGatewayStdioUpstream(t *testing.T) {
	t.Setenv(upstreamEnv, "1")
	t.Setenv("COMMITLAYER_API_KEY", testKey)
	rec := newFakeRecorder(t)
	logs := &syncBuffer{}
	g := newGateway(t, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{Command: []string{os.Args[0], "-test.run=^$"}}}, logs)
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close) // after the agent's session closes (cleanups run last first)
	cs := agentSession(t, srv.URL, "support-bot", nil)
	ctx := context.Background()

	require.ElementsMatch(t, []string{"refund", "get_order", "env", "echo_meta", "broken", "crash", "progress", "huge", "garbage"}, toolNames(t, cs))

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "o_1", "amount": 2500, "currency": "USD"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, []string{`{"refund_id":"re_o_1","status":"succeeded"}`}, text(t, res), "no note without -wait")

	// Unbound: forwarded, nothing recorded.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"order_id": "o_1"}})
	require.NoError(t, err)
	require.Equal(t, []string{`{"status":"paid"}`}, text(t, res))

	// A failed call is recorded claiming failure; the result-dependent
	// binding does not match.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "o_2", "amount": 0, "currency": "USD"}})
	require.NoError(t, err)
	require.True(t, res.IsError)

	actions, keys := rec.recorded()
	require.Len(t, actions, 3)
	require.Equal(t, commitlayer.Subject("order:o_1"), actions[0].Subject)
	require.Equal(t, commitlayer.Attrs{"amount": int64(2500), "currency": "USD"}, actions[0].Params)
	require.Equal(t, commitlayer.Attrs{"refund_id": "re_o_1"}, actions[1].Params)
	require.Equal(t, "support-bot", actions[0].Agent)
	require.Equal(t, commitlayer.ClaimSuccess, actions[0].Claim.Status)
	require.Equal(t, commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "amount must be positive"}, actions[2].Claim)
	require.Equal(t, commitlayer.Subject("order:o_2"), actions[2].Subject)
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, "mcp/"+cs.ID()+"/"), "key %q names the session", k)
	}

	// The upstream never sees the gateway's key.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "env"})
	require.NoError(t, err)
	require.Equal(t, []string{"key="}, text(t, res))

	// A protocol error upstream is the agent's tool error.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "broken"})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, text(t, res)[0], "database on fire")

	require.NotContains(t, logs.String(), testKey)
}

// TestGatewayHTTPUpstream: an HTTP upstream sees its own headers and the
// agent's Authorization, never the gateway's key; a retried call (same
// session, same JSON-RPC id) records one action; -wait tells the agent of
// a FAIL in the result; tools the upstream adds appear.
func TestGatewayHTTPUpstream(t *testing.T) {
	t.Setenv("COMMITLAYER_API_KEY", testKey)
	calls := &callCounter{}
	up := upstreamServer(calls)
	var mu sync.Mutex
	var seen []http.Header
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(upSrv.Close)

	rec := newFakeRecorder(t)
	rec.verdict = &commitlayer.Verdict{Status: commitlayer.StatusFail, Provisional: true, Findings: []commitlayer.Finding{{
		Code: commitlayer.CodeMissingEffect, Check: "refund", Message: "no refund_created on order:o_7", Hint: commitlayer.RemedyHumanReview,
	}}}
	logs := &syncBuffer{}
	g := newGateway(t, mcpgw.Config{Recorder: rec, Wait: true, ForwardAuth: true, Agent: "refunds-agent",
		Upstream: mcpgw.Upstream{URL: upSrv.URL, Header: http.Header{"X-Upstream-Token": {"up-123"}}}}, logs)
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close) // after the agent's session closes (cleanups run last first)
	cs := agentSession(t, srv.URL, "ignored-name", http.Header{"Authorization": {"Bearer agent-token"}})
	ctx := context.Background()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "o_7", "amount": 100, "currency": "EUR"}})
	require.NoError(t, err)
	got := text(t, res)
	require.Len(t, got, 3, "the upstream's text and a FAIL note per recorded action: %v", got)
	require.Contains(t, got[1], "did NOT verify")
	actions, _ := rec.recorded()
	require.Contains(t, got[1], actions[0].ID)
	require.Contains(t, got[1], "missing_effect refund: no refund_created on order:o_7 (hint: human_review: a person should look")
	require.Len(t, actions, 2)
	require.Equal(t, "refunds-agent", actions[0].Agent, "-agent wins over the client's name")

	// The upstream saw its own header and the agent's bearer on the call,
	// never the gateway's key.
	mu.Lock()
	var sawAuth bool
	for _, h := range seen {
		require.Equal(t, "up-123", h.Get("X-Upstream-Token"))
		for k, vs := range h {
			for _, v := range vs {
				require.NotContains(t, v, testKey, "header %s", k)
			}
		}
		sawAuth = sawAuth || h.Get("Authorization") == "Bearer agent-token"
	}
	mu.Unlock()
	require.True(t, sawAuth, "the agent's Authorization reached the upstream on its call")

	// A retried call: the same session and JSON-RPC id, posted twice by
	// hand. The upstream is called twice (the gateway forwards), one action
	// per binding is recorded.
	before := calls.get()
	sid := rawInitialize(t, srv.URL)
	call := `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"refund","arguments":{"order_id":"o_8","amount":5,"currency":"USD"}}}`
	first := rawPost(t, srv.URL, sid, call)
	second := rawPost(t, srv.URL, sid, call)
	require.Contains(t, first, "re_o_8")
	require.Contains(t, second, "re_o_8")
	require.Equal(t, before+2, calls.get())
	actions, keys := rec.recorded()
	require.Len(t, actions, 4, "two bindings, one action each, whatever the retries")
	var retried int
	for _, k := range keys {
		if strings.HasPrefix(k, "mcp/"+sid+"/41/") {
			retried++
		}
	}
	require.Equal(t, 2, retried)
	// The same id as a string is another request.
	rawPost(t, srv.URL, sid, strings.Replace(call, `"id":41`, `"id":"41"`, 1))
	actions, _ = rec.recorded()
	require.Len(t, actions, 6)

	// Tools added upstream are listed by the gateway (tools/list_changed).
	up.AddTool(&mcp.Tool{Name: "late_tool", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
		})
	require.Eventually(t, func() bool {
		for _, n := range toolNames(t, cs) {
			if n == "late_tool" {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "late_tool"})
	require.NoError(t, err)
	require.Equal(t, []string{"late"}, text(t, res))

	// The upstream going away: the agent's tool error, not a crash.
	upSrv.CloseClientConnections()
	upSrv.Close()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"order_id": "o_1"}})
	require.NoError(t, err)
	require.True(t, res.IsError)

	require.NotContains(t, logs.String(), testKey)
}

// TestGatewayStdioDownstream serves the gateway on a pipe pair as on stdio:
// a retried call carries the same JSON-RPC id and records nothing new.
func TestGatewayStdioDownstream(t *testing.T) {
	up := upstreamServer(nil)
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)
	rec := newFakeRecorder(t)
	g := newGateway(t, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{URL: upSrv.URL}}, io.Discard)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.ServeIO(ctx, inR, outW) }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(msg string) {
		_, err := io.WriteString(inW, msg+"\n")
		require.NoError(t, err)
	}
	answer := func(id string) string {
		for lines.Scan() {
			if strings.Contains(lines.Text(), `"id":`+id) {
				return lines.Text()
			}
		}
		t.Fatalf("no answer to %s: %v", id, lines.Err())
		return ""
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stdio-agent","version":"1"}}}`)
	answer("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"refund","arguments":{"order_id":"o_3","amount":7,"currency":"USD"}}}`
	send(call)
	require.Contains(t, answer("9"), "re_o_3")
	send(call)
	require.Contains(t, answer("9"), "re_o_3")
	actions, keys := rec.recorded()
	require.Len(t, actions, 2)
	require.Equal(t, "stdio-agent", actions[0].Agent)
	for _, k := range keys {
		require.Regexp(t, `^mcp/local-[0-9a-f]+/9/refund_customer/[01]$`, k)
	}
	_ = inW.Close()
	cancel()
	<-done
}

// rawInitialize opens a session by hand and returns its Mcp-Session-Id.
func rawInitialize(t *testing.T, url string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-agent","version":"1"}}}`
	resp := rawDo(t, url, "", body)
	sid := resp.Header.Get("Mcp-Session-Id")
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NotEmpty(t, sid)
	resp = rawDo(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	return sid
}

func rawPost(t *testing.T, url, sid, body string) string {
	t.Helper()
	resp := rawDo(t, url, sid, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}

func rawDo(t *testing.T, url, sid, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcpgw.HeaderRequestID, "spoofed")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// TestGatewayRefreshesBindings: a contract binding a tool after the
// gateway started records that tool's calls once the bindings are fetched
// again; a failed fetch keeps the last bindings.
func TestGatewayRefreshesBindings(t *testing.T) {
	up := upstreamServer(nil)
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)
	rec := newFakeRecorder(t)
	g := newGateway(t, mcpgw.Config{Recorder: rec, BindingsRefresh: time.Nanosecond, Upstream: mcpgw.Upstream{URL: upSrv.URL}}, io.Discard)
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	cs := agentSession(t, srv.URL, "agent", nil)
	ctx := context.Background()
	read := func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"order_id": "o_5"}})
		require.NoError(t, err)
	}
	read()
	actions, _ := rec.recorded()
	require.Empty(t, actions, "get_order is not bound yet")

	c, err := contracts.Parse([]byte(`id: order_read
subject: order
settlement: 1m
sources: [orders]
bindings:
  - tool: get_order
    subject: "'order:' + args.order_id"
`))
	require.NoError(t, err)
	rec.setBindings(contracts.NewBindings([]*contracts.Contract{c}), nil)
	read()
	actions, _ = rec.recorded()
	require.Len(t, actions, 1)
	require.Equal(t, "order_read", actions[0].Contract)

	rec.setBindings(nil, errors.New("commitlayer is down"))
	read()
	actions, _ = rec.recorded()
	require.Len(t, actions, 2, "a failed fetch keeps the last bindings")
}

// TestGatewayJoinsRetriesOfAFailedCall: an agent's call that repeats a
// call answered with an error (same session, same arguments) records as
// that call's action: the recorder sees the first action again under its
// key, so the action's window holds both attempts. A call answered without
// an error ends the chain: the same call once more is a new action, and so
// is the same call from another session.
func TestGatewayJoinsRetriesOfAFailedCall(t *testing.T) {
	up := upstreamServer(nil)
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)
	rec := newFakeRecorder(t)
	clock := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	g := newGateway(t, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{URL: upSrv.URL}, Now: func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}}, &syncBuffer{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	cs := agentSession(t, srv.URL, "agent-1", nil)
	ctx := context.Background()
	args := map[string]any{"order_id": "o_flaky", "amount": 100, "currency": "EUR"}
	byAmount := func() []commitlayer.Action { // binding 0's actions (binding 1 reads the result)
		actions, _ := rec.recorded()
		var out []commitlayer.Action
		for _, a := range actions {
			if _, ok := a.Params["amount"]; ok {
				out = append(out, a)
			}
		}
		return out
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	require.NoError(t, err)
	require.True(t, res.IsError, "the first attempt times out")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	require.NoError(t, err)
	require.False(t, res.IsError)
	got := byAmount()
	require.Len(t, got, 1, "the retry is the timed-out call's action")
	require.Equal(t, commitlayer.ClaimSuccess, got[0].Claim.Status, "the last attempt's")
	require.Equal(t, time.Date(2026, 12, 1, 9, 0, 1, 0, time.UTC), got[0].RequestedAt, "requested_at from Config.Now, the first attempt's")

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	require.NoError(t, err)
	require.Len(t, byAmount(), 2, "after a success the same call is a new action")

	other := agentSession(t, srv.URL, "agent-1", nil)
	_, err = other.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"order_id": "o_7"}})
	require.NoError(t, err)
	clockMu.Lock()
	readAt := clock
	clockMu.Unlock()
	_, err = other.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "o_7", "amount": 0, "currency": "EUR"}})
	require.NoError(t, err)
	got = byAmount()
	require.Equal(t, readAt, got[len(got)-1].RequestedAt, "the work began at the session's read before the refund")
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "o_7", "amount": 0, "currency": "EUR"}})
	require.NoError(t, err)
	require.Len(t, byAmount(), 4, "a failed call in another session starts no chain here")
}
