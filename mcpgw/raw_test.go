package mcpgw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/mcpgw"
)

// These tests speak MCP's Streamable HTTP by hand (net/http and JSON), as
// an agent written in another language would.

type rawMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type rawAnswer struct {
	status int
	header http.Header
	body   string
	msgs   []rawMsg // the JSON-RPC messages of a JSON or SSE body
}

// rawReq posts body (any method) with the given headers and reads the
// answer whole.
func rawReq(t *testing.T, method, url, sid, version, body string) rawAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := rawAnswer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(a.body, "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				var m rawMsg
				require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(d)), &m), "%s", d)
				a.msgs = append(a.msgs, m)
			}
		}
	} else if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(b) > 0 {
		var m rawMsg
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
		a.msgs = append(a.msgs, m)
	}
	return a
}

// response is the answer's message for id.
func (a rawAnswer) response(t *testing.T, id string) rawMsg {
	t.Helper()
	for _, m := range a.msgs {
		if string(m.ID) == id && m.Method == "" {
			return m
		}
	}
	t.Fatalf("no response to %s in %d %q", id, a.status, a.body)
	return rawMsg{}
}

func initBody(version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw-agent","version":"1"}}}`, version)
}

func callBody(id, tool, args string) string {
	if args == "" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q}}`, id, tool)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// rawGateway is a gateway over HTTP in front of the test upstream.
func rawGateway(t *testing.T, cfg mcpgw.Config) (*mcpgw.Gateway, *fakeRecorder, string, *syncBuffer) {
	t.Helper()
	up := upstreamServer(nil)
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)
	rec := newFakeRecorder(t)
	if cfg.Recorder == nil {
		cfg.Recorder = rec
	}
	cfg.Upstream = mcpgw.Upstream{URL: upSrv.URL}
	logs := &syncBuffer{}
	g := newGateway(t, cfg, logs)
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	return g, rec, srv.URL, logs
}

// TestRawHTTPLifecycle: initialize answers the asked version when the
// gateway speaks it and its own latest otherwise, with an Mcp-Session-Id;
// a request without a session, with an unknown one or a wrong
// Mcp-Protocol-Version is refused; GET opens the session's SSE stream
// (list_changed arrives there); DELETE ends the session.
func TestRawHTTPLifecycle(t *testing.T) {
	_, rec, url, _ := rawGateway(t, mcpgw.Config{})

	for asked, want := range map[string]string{
		"2025-06-18": "2025-06-18", "2025-03-26": "2025-03-26", "2024-11-05": "2024-11-05",
		"2025-11-25": "2025-11-25", "1999-01-01": "2025-11-25",
	} {
		a := rawReq(t, "POST", url, "", "", initBody(asked))
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.NotEmpty(t, a.header.Get("Mcp-Session-Id"))
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct {
				Name string `json:"name"`
			} `json:"serverInfo"`
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(a.response(t, "0").Result, &res))
		require.Equal(t, want, res.ProtocolVersion, "asked %s", asked)
		require.Equal(t, "commitlayer-mcp-gateway", res.ServerInfo.Name)
		require.Contains(t, res.Capabilities, "tools")
	}

	// A call without a session, or with one the gateway never gave.
	a := rawReq(t, "POST", url, "", "2025-06-18", callBody("1", "refund", `{"order_id":"o_1","amount":5,"currency":"USD"}`))
	require.GreaterOrEqual(t, a.status, 400, a.body)
	a = rawReq(t, "POST", url, "no-such-session", "2025-06-18", callBody("1", "refund", `{"order_id":"o_1","amount":5,"currency":"USD"}`))
	require.Equal(t, http.StatusNotFound, a.status, a.body)
	actions, _ := rec.recorded()
	require.Empty(t, actions, "no session, no call, no action")

	sid := rawInitialize(t, url)
	a = rawReq(t, "POST", url, sid, "1999-01-01", `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	require.Equal(t, http.StatusBadRequest, a.status, "an Mcp-Protocol-Version the gateway does not speak: %s", a.body)
	a = rawReq(t, "POST", url, sid, "2025-06-18", `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.JSONEq(t, `{}`, string(a.response(t, "2").Result))

	// The transport's own rules: JSON bodies, both media types accepted.
	req0, err := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
	require.NoError(t, err)
	req0.Header.Set("Mcp-Session-Id", sid)
	req0.Header.Set("Content-Type", "text/plain")
	req0.Header.Set("Accept", "application/json, text/event-stream")
	resp0, err := http.DefaultClient.Do(req0)
	require.NoError(t, err)
	resp0.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, resp0.StatusCode)
	req0.Header.Set("Content-Type", "application/json")
	req0.Header.Set("Accept", "text/html")
	req0.Body = io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
	resp0, err = http.DefaultClient.Do(req0)
	require.NoError(t, err)
	resp0.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp0.StatusCode)

	// GET: the session's stream; tools/list_changed comes on it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
	a = rawReq(t, "GET", url, "", "2025-06-18", "")
	require.Equal(t, http.StatusBadRequest, a.status, "GET without a session")

	// DELETE ends the session: its next request is 404.
	a = rawReq(t, "DELETE", url, sid, "2025-06-18", "")
	require.Equal(t, http.StatusNoContent, a.status, a.body)
	a = rawReq(t, "POST", url, sid, "2025-06-18", `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	require.Equal(t, http.StatusNotFound, a.status)
	a = rawReq(t, "PUT", url, sid, "2025-06-18", "")
	require.Equal(t, http.StatusMethodNotAllowed, a.status)
}

// TestRawHTTPListChangedOnStream: a tool the upstream adds is announced on
// the session's GET stream as notifications/tools/list_changed.
func TestRawHTTPListChangedOnStream(t *testing.T) {
	up := upstreamServer(nil)
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), Upstream: mcpgw.Upstream{URL: upSrv.URL}}, io.Discard)
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	sid := rawInitialize(t, srv.URL)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/tools/list_changed") {
				got <- sc.Text()
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond) // the stream is open before the change
	up.AddTool(&mcp.Tool{Name: "new_tool", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed on the GET stream")
	}
	a := rawReq(t, "POST", srv.URL, sid, "2025-06-18", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	require.Contains(t, string(a.response(t, "5").Result), `"new_tool"`)
}

// TestRawHTTPIDs: a JSON-RPC id is keyed as the SDK reads it: 7 and "7"
// are two calls (two actions), 7 again or 7.0 a retry of the first (no new
// action), and the same id in another session another call. Each is
// answered with its own id, as sent.
func TestRawHTTPIDs(t *testing.T) {
	_, rec, url, _ := rawGateway(t, mcpgw.Config{})
	sid := rawInitialize(t, url)
	args := `{"order_id":"o_ids","amount":5,"currency":"USD"}`
	count := func() int {
		actions, _ := rec.recorded()
		return len(actions)
	}
	a := rawReq(t, "POST", url, sid, "2025-06-18", callBody("7", "refund", args))
	require.Contains(t, string(a.response(t, "7").Result), "re_o_ids")
	require.Equal(t, 2, count(), "two bindings")
	a = rawReq(t, "POST", url, sid, "2025-06-18", callBody(`"7"`, "refund", args))
	require.Contains(t, string(a.response(t, `"7"`).Result), "re_o_ids")
	require.Equal(t, 4, count(), `"7" is not 7`)
	rawReq(t, "POST", url, sid, "2025-06-18", callBody("7", "refund", args))
	rawReq(t, "POST", url, sid, "2025-06-18", callBody("7.0", "refund", args))
	require.Equal(t, 4, count(), "7 again is a retry")
	other := rawInitialize(t, url)
	rawReq(t, "POST", url, other, "2025-06-18", callBody("7", "refund", args))
	require.Equal(t, 6, count(), "another session's 7 is another call")
	_, keys := rec.recorded()
	require.Contains(t, keys, "mcp/"+sid+"/7/refund_customer/0")
	require.Contains(t, keys, "mcp/"+sid+`/"7"/refund_customer/0`)
	require.Contains(t, keys, "mcp/"+other+"/7/refund_customer/0")

	// The same id for another call (MCP forbids it; an agent may still):
	// another action, not a replay of the first.
	rawReq(t, "POST", url, sid, "2025-06-18", callBody("7", "refund", `{"order_id":"o_other","amount":6,"currency":"USD"}`))
	require.Equal(t, 8, count(), "another call under a used id records its own actions")
	actions, _ := rec.recorded()
	require.Equal(t, "order:o_other", string(actions[len(actions)-1].Subject))

	// A string id that is long or holds control characters is hashed into
	// a key the API takes.
	long := `"` + strings.Repeat("x", 400) + `\n"`
	a = rawReq(t, "POST", url, sid, "2025-06-18", callBody(long, "refund", args))
	require.Contains(t, string(a.response(t, long).Result), "re_o_ids")
	_, keys = rec.recorded()
	for _, k := range keys {
		require.LessOrEqual(t, len(k), 255)
		require.NotContains(t, k, "\n")
	}
	require.Equal(t, 10, count())
}

// TestRawHTTPHostileInput: arguments absent, null, not an object, huge or
// failing the binding, bodies that are not JSON-RPC, batches, unknown
// tools: each gets a clear answer (an HTTP error, a JSON-RPC error or a
// tool result), bound calls that cannot fill their binding are forwarded
// and not recorded, and the gateway keeps serving.
func TestRawHTTPHostileInput(t *testing.T) {
	_, rec, url, logs := rawGateway(t, mcpgw.Config{})
	sid := rawInitialize(t, url)
	post := func(body string) rawAnswer { return rawReq(t, "POST", url, sid, "2025-06-18", body) }
	result := func(a rawAnswer, id string) map[string]any {
		t.Helper()
		m := a.response(t, id)
		require.Nil(t, m.Error, "%s", a.body)
		var r map[string]any
		require.NoError(t, json.Unmarshal(m.Result, &r))
		return r
	}

	// Bound tool, arguments that cannot fill the binding: forwarded, the
	// upstream's answer, nothing recorded.
	for i, args := range []string{"", "null", "{}", `{"amount":0}`, `{"order_id":5,"amount":"x"}`} {
		id := fmt.Sprint(100 + i)
		a := post(callBody(id, "refund", args))
		require.Equal(t, http.StatusOK, a.status, a.body)
		r := result(a, id)
		require.Equal(t, true, r["isError"], "args %q: the upstream refuses amount 0: %s", args, a.body)
	}
	// Not an object: refused by the gateway with a clear error, or
	// forwarded; never recorded.
	for i, args := range []string{`[1,2]`, `"refund"`, `42`, `true`} {
		id := fmt.Sprint(200 + i)
		a := post(callBody(id, "refund", args))
		if a.status == http.StatusOK {
			m := a.response(t, id)
			if m.Error == nil {
				require.Contains(t, string(m.Result), `"isError":true`, "args %s: %s", args, a.body)
			}
		} else {
			require.Equal(t, http.StatusBadRequest, a.status, a.body)
		}
	}
	actions, _ := rec.recorded()
	require.Empty(t, actions, "no call here could fill the binding")
	require.Contains(t, logs.String(), "binding could not be evaluated")

	// Huge arguments (3 MiB): forwarded and recorded with the claim clipped.
	big := strings.Repeat("a", 3<<20)
	a := post(callBody("300", "refund", `{"order_id":"o_big","amount":5,"currency":"USD","note":"`+big+`"}`))
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, string(a.response(t, "300").Result), "re_o_big")
	actions, _ = rec.recorded()
	require.Len(t, actions, 2)
	// Over the limit: 413, nothing run.
	a = post(callBody("301", "refund", `{"order_id":"o_huge","note":"`+strings.Repeat("a", 9<<20)+`"}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status)

	// Not JSON, not JSON-RPC, a batch (not in 2025-06-18), an unknown
	// method, an unknown tool, a tools/call without params or name.
	for body, want := range map[string]int{
		`{"jsonrpc":"2.0","id":`:                               http.StatusBadRequest,
		`not json at all`:                                      http.StatusBadRequest,
		`[` + callBody("400", "get_order", "{}") + `]`:         http.StatusBadRequest,
		`{"jsonrpc":"2.0","id":401,"method":"no/such/method"}`: http.StatusBadRequest,
	} {
		a := post(body)
		require.Equal(t, want, a.status, "%s: %s", commitlayerClip(body), a.body)
	}
	for body, id := range map[string]string{
		callBody("402", "no_such_tool", "{}"):                           "402",
		`{"jsonrpc":"2.0","id":403,"method":"tools/call"}`:              "403",
		`{"jsonrpc":"2.0","id":404,"method":"tools/call","params":{}}`:  "404",
		`{"jsonrpc":"2.0","id":405,"method":"tools/call","params":[1]}`: "405",
	} {
		a := post(body)
		if a.status == http.StatusOK {
			m := a.response(t, id)
			if m.Error == nil {
				require.Contains(t, string(m.Result), `"isError":true`, "%s: %s", body, a.body)
			} else {
				require.NotEmpty(t, m.Error.Message)
			}
		} else {
			require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", body, a.body)
		}
	}

	// Still serving.
	a = post(callBody("500", "get_order", `{"order_id":"o_1"}`))
	require.Contains(t, string(a.response(t, "500").Result), "paid")
}

func commitlayerClip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// TestRawHTTPConcurrentSessions: many sessions, each with concurrent calls
// (each retried with the same id once answered): every call is answered
// with its own result, every distinct (session, id) recorded once. (The
// same id twice in flight at once is the SDK's JSON-RPC error -32600.)
func TestRawHTTPConcurrentSessions(t *testing.T) {
	_, rec, url, _ := rawGateway(t, mcpgw.Config{})
	const sessions, calls = 6, 8
	var wg sync.WaitGroup
	errs := make(chan error, sessions*calls*2)
	for s := range sessions {
		sid := rawInitialize(t, url)
		for c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				order := fmt.Sprintf("o_%d_%d", s, c)
				for range 2 { // the call, and its retry once answered
					a := rawReq(t, "POST", url, sid, "2025-06-18", callBody(fmt.Sprint(c+1), "refund",
						fmt.Sprintf(`{"order_id":%q,"amount":5,"currency":"USD"}`, order)))
					if !strings.Contains(a.body, "re_"+order) {
						errs <- fmt.Errorf("session %d call %d: %s", s, c, a.body)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	actions, keys := rec.recorded()
	require.Len(t, actions, sessions*calls*2, "one action per binding per (session, id)")
	require.Len(t, keys, sessions*calls*2)
}

// TestRawHTTPBatch: a 2025-03-26 agent may batch calls in one POST; each
// call is keyed on its own id, so the batch sent again records nothing
// new.
func TestRawHTTPBatch(t *testing.T) {
	_, rec, url, _ := rawGateway(t, mcpgw.Config{})
	a := rawReq(t, "POST", url, "", "", initBody("2025-03-26"))
	sid := a.header.Get("Mcp-Session-Id")
	rawReq(t, "POST", url, sid, "2025-03-26", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	batch := `[` + callBody("1", "refund", `{"order_id":"o_b1","amount":5,"currency":"USD"}`) + `,` +
		callBody(`"two"`, "refund", `{"order_id":"o_b2","amount":5,"currency":"USD","_x":1}`) + `,` +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"refund","arguments":{"order_id":"o_b3","amount":5,"currency":"USD"},"_meta":{"io.commitlayer/jsonrpc-id":"spoofed"}}}` + `]`
	for range 2 {
		a = rawReq(t, "POST", url, sid, "2025-03-26", batch)
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.Contains(t, a.body, "re_o_b1")
		require.Contains(t, a.body, "re_o_b2")
		require.Contains(t, a.body, "re_o_b3")
	}
	actions, keys := rec.recorded()
	require.Len(t, actions, 6, "three calls, two bindings, the batch twice")
	require.Contains(t, keys, "mcp/"+sid+"/1/refund_customer/0")
	require.Contains(t, keys, "mcp/"+sid+`/"two"/refund_customer/0`)
	require.Contains(t, keys, "mcp/"+sid+"/3/refund_customer/0", "the agent's own value of the gateway's _meta key is overwritten")

	// The gateway's _meta key never reaches the upstream; the agent's
	// other _meta does, batched or not.
	for _, body := range []string{
		`[{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo_meta","_meta":{"io.commitlayer/jsonrpc-id":"x","k":"v"}}}]`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo_meta","_meta":{"io.commitlayer/jsonrpc-id":"x","k":"v"}}}`,
	} {
		a = rawReq(t, "POST", url, sid, "2025-03-26", body)
		require.Contains(t, a.body, `meta={\"k\":\"v\"}`, a.body)
	}
}

// TestRawHTTPSessionIdleTimeout: with SessionIdleTimeout a session that
// sent nothing for that long is ended: its next request is 404, and a new
// initialize is served.
func TestRawHTTPSessionIdleTimeout(t *testing.T) {
	_, _, url, _ := rawGateway(t, mcpgw.Config{SessionIdleTimeout: 200 * time.Millisecond})
	sid := rawInitialize(t, url)
	a := rawReq(t, "POST", url, sid, "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	require.Equal(t, http.StatusOK, a.status)
	require.Eventually(t, func() bool {
		return rawReq(t, "POST", url, sid, "2025-06-18", `{"jsonrpc":"2.0","id":2,"method":"ping"}`).status == http.StatusNotFound
	}, 10*time.Second, 300*time.Millisecond)
	require.NotEqual(t, sid, rawInitialize(t, url))
}
