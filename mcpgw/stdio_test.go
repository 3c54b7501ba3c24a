package mcpgw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/mcpgw"
)

// stdioAgent speaks newline-delimited JSON-RPC to a gateway on pipes.
type stdioAgent struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
}

func newStdioAgent(t *testing.T, g *mcpgw.Gateway) *stdioAgent {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.ServeIO(ctx, inR, outW) }()
	a := &stdioAgent{t: t, in: inW, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
		close(a.lines)
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		cancel()
		<-done
		_ = outW.Close()
	})
	return a
}

func (a *stdioAgent) send(msg string) {
	a.t.Helper()
	_, err := io.WriteString(a.in, msg+"\n")
	require.NoError(a.t, err)
}

// answer waits for the response with id (raw JSON), skipping notifications.
func (a *stdioAgent) answer(id string) rawMsg {
	a.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-a.lines:
			require.True(a.t, ok, "the gateway closed stdout waiting for %s", id)
			var m rawMsg
			require.NoError(a.t, json.Unmarshal([]byte(line), &m), "%s", line)
			if string(m.ID) == id && m.Method == "" {
				return m
			}
		case <-timeout:
			a.t.Fatalf("no answer to %s", id)
		}
	}
}

// TestStdioRaw: an agent on stdio written by hand. It negotiates its
// version, its ids 1 and "1" are two calls and a retried id one, bad
// arguments and lines that are not JSON-RPC get clear answers and the
// session goes on.
func TestStdioRaw(t *testing.T) {
	up := upstreamServer(nil)
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)
	rec := newFakeRecorder(t)
	g := newGateway(t, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{URL: upSrv.URL}}, io.Discard)
	a := newStdioAgent(t, g)

	a.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"get_order","arguments":{}}}`)
	require.NotNil(t, a.answer(`"c1"`).Error, "a call before initialize is refused")

	a.send(initBody("2025-06-18"))
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	require.NoError(t, json.Unmarshal(a.answer("0").Result, &init))
	require.Equal(t, "2025-06-18", init.ProtocolVersion)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	args := `{"order_id":"o_s","amount":5,"currency":"USD"}`
	a.send(callBody("1", "refund", args))
	require.Contains(t, string(a.answer("1").Result), "re_o_s")
	a.send(callBody(`"1"`, "refund", args))
	require.Contains(t, string(a.answer(`"1"`).Result), "re_o_s")
	a.send(callBody("1", "refund", args))
	require.Contains(t, string(a.answer("1").Result), "re_o_s")
	actions, keys := rec.recorded()
	require.Len(t, actions, 4, "1 and \"1\": two calls, two bindings each; 1 again a retry")
	var numeric, text int
	for _, k := range keys {
		switch {
		case strings.Contains(k, `/"1"/`):
			text++
		case strings.Contains(k, "/1/"):
			numeric++
		}
	}
	require.Equal(t, 2, numeric)
	require.Equal(t, 2, text)

	// Bad arguments: an answer each, nothing recorded.
	for i, bad := range []string{"null", "[1]", `"x"`, `{"amount":0}`} {
		id := string(rune('a' + i))
		a.send(callBody(`"`+id+`"`, "refund", bad))
		m := a.answer(`"` + id + `"`)
		if m.Error == nil {
			require.Contains(t, string(m.Result), `"isError":true`, "%s", bad)
		}
	}
	a.send(`{"jsonrpc":"2.0","id":"u","method":"tools/call","params":{"name":"no_such_tool"}}`)
	m := a.answer(`"u"`)
	if m.Error == nil {
		require.Contains(t, string(m.Result), `"isError":true`)
	}
	actions, _ = rec.recorded()
	require.Len(t, actions, 4)

	// An unknown method is the JSON-RPC error -32601; the session goes on.
	a.send(`{"jsonrpc":"2.0","id":"m","method":"no/such/method"}`)
	require.Equal(t, -32601, a.answer(`"m"`).Error.Code)
	a.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	require.JSONEq(t, `{}`, string(a.answer(`"p"`).Result))
}

// TestStdioNotJSON: lines on stdio that are not JSON-RPC messages are
// answered with JSON-RPC errors (id null when none can be read) and the
// session goes on.
func TestStdioNotJSON(t *testing.T) {
	up := upstreamServer(nil)
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), Upstream: mcpgw.Upstream{URL: upSrv.URL}}, io.Discard)
	a := newStdioAgent(t, g)
	a.send(initBody("2025-06-18"))
	a.answer("0")
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for line, code := range map[string]int{
		`this is not json`:       -32700,
		`{"jsonrpc":"2.0","id":`: -32700,
		`42`:                     -32600,
		`{"foo":1}`:              -32600,
		`[]`:                     -32600,
		`[1]`:                    -32600,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`: -32600,
		`{"jsonrpc":"1.0","id":9,"method":"ping"}`:       -32600,
	} {
		a.send(line)
		id := "null"
		if line == `{"jsonrpc":"1.0","id":9,"method":"ping"}` {
			id = "9"
		}
		m := a.answer(id)
		require.NotNil(t, m.Error, "%s", line)
		require.Equal(t, code, m.Error.Code, "%s", line)
	}
	a.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	require.JSONEq(t, `{}`, string(a.answer(`"p"`).Result), "the session goes on")
	a.send(callBody(`"q"`, "get_order", `{"order_id":"o_1"}`))
	require.Contains(t, string(a.answer(`"q"`).Result), "paid")
}
