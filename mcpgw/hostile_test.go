package mcpgw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/mcpgw"
)

// Each test here reproduces one case of the gateway tried against hostile
// upstreams and agents (cases 3 to 9); each failed on the gateway before
// it forwarded the upstream's JSON through a guard.

// fixed is a result a go-sdk server answers as this JSON, as sent.
type fixed struct {
	*mcp.CallToolResult
	raw string
}

func (f fixed) MarshalJSON() ([]byte, error) { return []byte(f.raw), nil }

// asSent are answers carrying every field protocol 2025-11-25 gives each
// list and result type, in an order no encoder would choose, with values
// an encoder would drop or add (false hints sent, absent ones absent).
var asSent = map[string]string{
	"tools/list": `{"tools":[` +
		`{"name":"zeta","title":"Zeta","description":"last by name, first in the list","inputSchema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},` +
		`"outputSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}},"annotations":{"title":"Zeta tool","destructiveHint":true,"openWorldHint":false},` +
		`"icons":[{"src":"https://example.com/z.png","mimeType":"image/png","sizes":["48x48"],"theme":"dark"}],"execution":{"taskSupport":"optional"},"_meta":{"vendor/x":1}},` +
		`{"inputSchema":{"type":"object"},"name":"alpha","annotations":{"readOnlyHint":false,"idempotentHint":false},"execution":{"taskSupport":"forbidden"}}],` +
		`"nextCursor":"c2","_meta":{"page":1}}`,
	"resources/list": `{"resources":[{"uri":"file:///b.txt","name":"b","title":"B","description":"d","mimeType":"text/plain","size":12,` +
		`"annotations":{"audience":["user","assistant"],"priority":0.5,"lastModified":"2026-11-30T10:00:00Z"},"icons":[{"src":"data:image/png;base64,AA=="}],"_meta":{"k":"v"}},` +
		`{"uri":"file:///a.txt","name":"a"}],"nextCursor":"r2"}`,
	"resources/templates/list": `{"resourceTemplates":[{"uriTemplate":"orders://{id}","name":"order","title":"Order","description":"d","mimeType":"application/json",` +
		`"annotations":{"priority":1},"icons":[{"src":"https://example.com/o.svg","mimeType":"image/svg+xml","sizes":["any"]}],"_meta":{"x":[1,2]}}]}`,
	"prompts/list": `{"prompts":[{"name":"greet","title":"Greet","description":"d","arguments":[{"name":"who","title":"Who","description":"d","required":true}],` +
		`"icons":[{"src":"https://example.com/g.png"}],"_meta":{}}],"nextCursor":""}`,
	"resources/read": `{"contents":[{"uri":"file:///b.txt","mimeType":"text/plain","text":"hi","_meta":{"m":1}},{"uri":"file:///c.bin","mimeType":"application/octet-stream","blob":"AAEC"}],"_meta":{"r":true}}`,
	"prompts/get": `{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi","annotations":{"audience":["user"]},"_meta":{"a":1}}},` +
		`{"role":"assistant","content":{"type":"resource","resource":{"uri":"file:///b.txt","text":"hi"}}}],"_meta":{}}`,
	"completion/complete": `{"completion":{"values":["ada","adam"],"total":10,"hasMore":true},"_meta":{"c":1}}`,
	"tools/call": `{"structuredContent":{"n":9007199254740993,"z":1,"a":2},"content":[{"type":"text","text":"{\"n\":9007199254740993}","annotations":{"priority":0.1}},` +
		`{"type":"image","data":"AQID","mimeType":"image/png"},{"type":"audio","data":"AQID","mimeType":"audio/wav"},` +
		`{"type":"resource_link","uri":"file:///b.txt","name":"b","title":"B","description":"d","mimeType":"text/plain","size":2,"icons":[{"src":"https://example.com/b.png"}]},` +
		`{"type":"resource","resource":{"uri":"file:///c.bin","blob":"AAEC","mimeType":"application/octet-stream"},"_meta":{"e":1}}],"isError":false,"_meta":{"trace":"t-1"}}`,
}

// asSentUpstream is a go-sdk server answering each method with asSent.
func asSentUpstream(t *testing.T) *httptest.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "as-sent", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Prompts: &mcp.PromptCapabilities{},
			Resources: &mcp.ResourceCapabilities{}, Completions: &mcp.CompletionCapabilities{}}})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if raw, ok := asSent[method]; ok {
				return fixed{&mcp.CallToolResult{}, raw}, nil
			}
			return next(ctx, method, req)
		}
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv
}

// TestPassThroughAsSent (case 3): for every list and result type, the
// result an agent gets through the gateway is the upstream's, byte for
// byte: its order, every field it sent (execution, icons, annotations,
// _meta) and none it did not (no false hints, no ttlMs or cacheScope).
func TestPassThroughAsSent(t *testing.T) {
	up := asSentUpstream(t)
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), Upstream: mcpgw.Upstream{URL: up.URL}}, io.Discard)
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)
	for name, url := range map[string]string{"upstream": up.URL, "gateway": gw.URL} {
		sid := rawReq(t, "POST", url, "", "", initBody("2025-11-25")).header.Get("Mcp-Session-Id")
		require.NotEmpty(t, sid, name)
		rawReq(t, "POST", url, sid, "2025-11-25", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		params := map[string]string{
			"tools/list": `{}`, "resources/list": `{}`, "resources/templates/list": `{}`, "prompts/list": `{}`,
			"resources/read": `{"uri":"file:///b.txt"}`, "prompts/get": `{"name":"greet"}`,
			"completion/complete": `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"a"}}`,
			"tools/call":          `{"name":"zeta","arguments":{"a":"x"}}`,
		}
		i := 0
		for method, want := range asSent {
			i++
			a := rawReq(t, "POST", url, sid, "2025-11-25", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, i, method, params[method]))
			got := a.response(t, fmt.Sprint(i))
			require.Nil(t, got.Error, "%s %s: %s", name, method, a.body)
			require.Equal(t, want, string(got.Result), "%s: %s as the upstream sent it", name, method)
		}
	}
}

// hostileUpstream is the test upstream (a go-sdk server) in front of which
// the requests of the methods in bad, and the tools/call of the tools in
// bad, are answered by bad's handler. Every body it is sent goes to saw.
type sawBodies struct {
	mu     sync.Mutex
	bodies []string
}

func (s *sawBodies) contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(strings.Join(s.bodies, "\n"), sub)
}

func hostileUpstream(t *testing.T, bad map[string]http.HandlerFunc) (*httptest.Server, *sawBodies) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(nil) }, nil)
	saw := &sawBodies{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			saw.mu.Lock()
			saw.bodies = append(saw.bodies, string(body[:min(len(body), 512)]))
			saw.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil {
				r.Header.Set("X-Call-Id", string(m.ID))
				if h := bad[m.Method]; h != nil {
					h(w, r)
					return
				}
				if h := bad[m.Params.Name]; h != nil && m.Method == "tools/call" {
					h(w, r)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, saw
}

// sse answers a call with these SSE bytes.
func sse(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, strings.ReplaceAll(body, "ID", r.Header.Get("X-Call-Id")))
	}
}

// callText calls tool through cs and returns its result's text.
func callText(t *testing.T, cs *mcp.ClientSession, tool string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"order_id": "o_1", "amount": 5, "currency": "EUR"}})
	require.NoError(t, err, tool)
	return strings.Join(text(t, res), "\n"), res.IsError
}

// TestRedirectKeepsCredentials (case 4): an upstream redirecting a call
// to another origin does not get the gateway's upstream credentials nor
// the agent's token sent there; the agent gets a tool error at once.
func TestRedirectKeepsCredentials(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		select {} // and never answers
	}))
	t.Cleanup(other.Close)
	up, _ := hostileUpstream(t, map[string]http.HandlerFunc{
		"env": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
		},
		"get_order": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect) // to itself, forever
		},
	})
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), ForwardAuth: true, Upstream: mcpgw.Upstream{URL: up.URL,
		Header: http.Header{"Authorization": {"Bearer upstream-secret"}}}}, io.Discard)
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)
	cs := agentSession(t, gw.URL, "a", http.Header{"Authorization": {"Bearer agent-token"}})
	msg, isErr := callText(t, cs, "env")
	require.True(t, isErr)
	require.Contains(t, msg, "redirected to another origin")
	mu.Lock()
	require.Empty(t, seen, "nothing went to the other origin")
	mu.Unlock()
	msg, isErr = callText(t, cs, "get_order")
	require.True(t, isErr)
	require.Contains(t, msg, "redirected more than 3 times")
	msg, isErr = callText(t, cs, "refund")
	require.False(t, isErr, "the session goes on: %s", msg)
}

// TestUpstreamCallDeadline (case 7): an upstream that never answers, an SSE
// stream that never answers, and an answer with another id each give the
// agent a tool error naming what happened, within the call's deadline;
// the upstream is told to cancel.
func TestUpstreamCallDeadline(t *testing.T) {
	up, saw := hostileUpstream(t, map[string]http.HandlerFunc{
		"env": func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
		"get_order": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		},
		"echo_meta": sse("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":987654,\"result\":{\"content\":[]}}\n\n"),
	})
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), CallTimeout: time.Second, Upstream: mcpgw.Upstream{URL: up.URL}}, io.Discard)
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)
	cs := agentSession(t, gw.URL, "a", nil)
	for _, tool := range []string{"env", "get_order"} {
		msg, isErr := callText(t, cs, tool)
		require.True(t, isErr, tool)
		require.Contains(t, msg, "did not answer tools/call within 1s (-call-timeout)", tool)
	}
	require.Eventually(t, func() bool { return saw.contains(`"notifications/cancelled"`) }, 10*time.Second, 20*time.Millisecond,
		"the upstream was sent notifications/cancelled")
	msg, isErr := callText(t, cs, "echo_meta")
	require.True(t, isErr)
	require.Contains(t, msg, "with the id of another request")
}

// TestMalformedAnswerFailsOnlyItsCall (case 8): an answer that is not
// JSON-RPC (truncated JSON, a broken SSE event) fails the call it answers;
// another agent's call right after, and the same agent's next one, are
// answered by the upstream.
func TestMalformedAnswerFailsOnlyItsCall(t *testing.T) {
	up, _ := hostileUpstream(t, map[string]http.HandlerFunc{
		"env": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+r.Header.Get("X-Call-Id")+`,"result":{"content":[`)
		},
		"get_order": sse("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"content\":[}\n\n"),
	})
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), Upstream: mcpgw.Upstream{URL: up.URL}}, io.Discard)
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)
	a, b := agentSession(t, gw.URL, "a", nil), agentSession(t, gw.URL, "b", nil)
	for _, tool := range []string{"env", "get_order"} {
		msg, isErr := callText(t, a, tool)
		require.True(t, isErr, tool)
		require.Contains(t, msg, "with a message that is not JSON-RPC", tool)
		msg, isErr = callText(t, b, "refund")
		require.False(t, isErr, "another agent's call: %s", msg)
		msg, isErr = callText(t, a, "refund")
		require.False(t, isErr, "the same agent's next call: %s", msg)
	}
}

// TestBoundsRefused (case 6, in small): a result, an SSE event and a
// stdio line over MaxMessage, and a listing past its pages, are refused to
// their own request with a message naming the bound; the session goes on.
// A record the API refused is told to the agent.
func TestBoundsRefused(t *testing.T) {
	const max = 64 << 10
	big := strings.Repeat("x", max)
	up, _ := hostileUpstream(t, map[string]http.HandlerFunc{
		"env": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+r.Header.Get("X-Call-Id")+`,"result":{"content":[{"type":"text","text":"`+big+`"}]}}`)
		},
		"get_order": sse("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + big + "\"}]}}\n\n"),
	})
	rec := newFakeRecorder(t)
	rec.refuse = &client.APIError{StatusCode: http.StatusRequestEntityTooLarge, Code: "too_large", Message: "request body too large"}
	g := newGateway(t, mcpgw.Config{Recorder: rec, MaxMessage: max, MaxListPages: 3, Upstream: mcpgw.Upstream{URL: up.URL}}, io.Discard)
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)
	cs := agentSession(t, gw.URL, "a", nil)
	for _, tool := range []string{"env", "get_order"} {
		msg, isErr := callText(t, cs, tool)
		require.True(t, isErr, tool)
		require.Contains(t, msg, "answer is larger than 65536 bytes (-max-message); refused", tool)
	}
	msg, isErr := callText(t, cs, "refund")
	require.False(t, isErr)
	require.Contains(t, msg, "CommitLayer refused to record this call (refund_customer on order:o_1): 413 request body too large")

	// A listing past its pages (the upstream pages by one here).
	ctx := context.Background()
	lp := mcp.NewServer(&mcp.Implementation{Name: "pages", Version: "1"}, &mcp.ServerOptions{PageSize: 1})
	for i := range 6 {
		lp.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	lpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return lp }, nil))
	t.Cleanup(lpSrv.Close)
	g2 := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), MaxListPages: 3, Upstream: mcpgw.Upstream{URL: lpSrv.URL}}, io.Discard)
	gw2 := httptest.NewServer(g2.HTTPHandler())
	t.Cleanup(gw2.Close)
	cs2 := agentSession(t, gw2.URL, "a", nil)
	n := 0
	var last error
	for _, err := range cs2.Tools(ctx, nil) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	require.Equal(t, 3, n)
	require.ErrorContains(t, last, "ran past 3 pages")
	_, err := cs2.ListTools(ctx, nil)
	require.NoError(t, err, "a new listing starts again")
}

// TestStdioUpstreamBadLines (cases 6 and 8 on stdio): a result line over
// MaxMessage is refused to its call; lines that are not JSON-RPC, or too
// long to say whose they are, are dropped; the command's session goes on.
func TestStdioUpstreamBadLines(t *testing.T) {
	t.Setenv(upstreamEnv, "1")
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), MaxMessage: 64 << 10, Upstream: mcpgw.Upstream{Command: []string{os.Args[0], "-test.run=^$"}}}, io.Discard)
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)
	cs := agentSession(t, gw.URL, "a", nil)
	msg, isErr := callText(t, cs, "huge")
	require.True(t, isErr)
	require.Contains(t, msg, "answer is larger than 65536 bytes (-max-message); refused")
	msg, isErr = callText(t, cs, "garbage")
	require.False(t, isErr, msg)
	require.Equal(t, "after the garbage", msg)
	msg, isErr = callText(t, cs, "refund")
	require.False(t, isErr, msg)
}

// TestMalformedAgentMessage (case 9): a body that is no JSON-RPC request,
// notification or response is answered with a JSON-RPC error, not 202.
func TestMalformedAgentMessage(t *testing.T) {
	_, _, url, _ := rawGateway(t, mcpgw.Config{})
	sid := rawInitialize(t, url)
	for body, code := range map[string]int{
		`{"jsonrpc":"2.0","id":55}`:            -32600,
		`{"jsonrpc":"2.0","id":56,"result":`:   -32700,
		`{"jsonrpc":"1.0","id":57,"result":1}`: -32600,
		`[{"jsonrpc":"2.0","id":58}]`:          -32600,
	} {
		a := rawReq(t, "POST", url, sid, "2025-06-18", body)
		require.Equal(t, http.StatusBadRequest, a.status, body)
		require.Len(t, a.msgs, 1, body)
		require.NotNil(t, a.msgs[0].Error, body)
		require.Equal(t, code, a.msgs[0].Error.Code, body)
	}
}
