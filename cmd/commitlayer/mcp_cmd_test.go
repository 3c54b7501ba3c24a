package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// fakeCommitLayer is the part of CommitLayer's API the gateway uses: the
// tenant's contracts and POST /v1/actions, behind the tenant key.
type fakeCommitLayer struct {
	key string

	mu      sync.Mutex
	actions []map[string]any
	keys    []string
}

const mcpCmdContract = `id: refund_customer
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
    params: {amount: args.amount}
`

func (f *fakeCommitLayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"bad key"}}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "GET" && r.URL.Path == "/v1/contracts":
		_, _ = io.WriteString(w, `{"contracts":[{"id":"refund_customer","version":1}]}`)
	case r.Method == "GET" && r.URL.Path == "/v1/contracts/refund_customer":
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "refund_customer", "version": 1, "source": mcpCmdContract})
	case r.Method == "POST" && r.URL.Path == "/v1/actions":
		var a map[string]any
		_ = json.NewDecoder(r.Body).Decode(&a)
		f.mu.Lock()
		f.actions = append(f.actions, a)
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"act_1","verdict_url":"/v1/actions/act_1"}`)
	default:
		http.NotFound(w, r)
	}
}

// TestMCPCommandServesHTTP runs `commitlayer mcp` as the binary does: it
// serves the upstream's tools at http://ADDR/mcp, records a bound call
// through the API with the tenant key (never in its logs), and stops on
// its context. A wrong key stops it at start with a message.
func TestMCPCommandServesHTTP(t *testing.T) {
	api := &fakeCommitLayer{key: "cl_cmd_test_key_93b1"}
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "refund", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"ok"}`}}}, nil
		})
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	t.Setenv("COMMITLAYER_URL", apiSrv.URL)
	t.Setenv("COMMITLAYER_API_KEY", "wrong")
	var out, errOut syncBuffer
	require.Equal(t, 1, run(context.Background(), []string{"mcp", "-upstream", upSrv.URL, "-addr", addr}, &out, &errOut))
	require.Contains(t, errOut.String(), "fetch bindings")
	require.NotContains(t, errOut.String(), "wrong")

	t.Setenv("COMMITLAYER_API_KEY", api.key)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var logs syncBuffer
	go func() { done <- run(ctx, []string{"mcp", "-upstream", upSrv.URL, "-addr", addr}, &out, &logs) }()
	var cs *mcp.ClientSession
	require.Eventually(t, func() bool {
		c := mcp.NewClient(&mcp.Implementation{Name: "cmd-agent", Version: "1"}, nil)
		cs, err = c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "o_c", "amount": 3}})
	require.NoError(t, err)
	require.Equal(t, `{"status":"ok"}`, res.Content[0].(*mcp.TextContent).Text)
	_ = cs.Close()

	api.mu.Lock()
	require.Len(t, api.actions, 1)
	require.Equal(t, "order:o_c", api.actions[0]["subject"])
	require.Equal(t, "cmd-agent", api.actions[0]["agent"])
	require.True(t, strings.HasPrefix(api.keys[0], "mcp/"), api.keys[0])
	api.mu.Unlock()

	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code)
	case <-time.After(20 * time.Second):
		t.Fatal("commitlayer mcp did not stop on its context")
	}
	require.NotContains(t, logs.String(), api.key)
	require.Contains(t, logs.String(), "action recorded")
}
