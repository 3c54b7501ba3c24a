package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/mcpgw"
	"github.com/commitlayer/commitlayer/workflows"
)

func TestMCPHelpShowsUpstreamFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"mcp", "-h"}, &out, &errOut))
	for _, f := range []string{"-upstream URL", "-upstream-cmd command", "-upstream-header", "-stdio", "-wait provisional", "-addr",
		"-call-timeout", "-max-message bytes", "-max-list-pages", "-max-list-bytes bytes"} {
		require.Contains(t, errOut.String(), f)
	}
	errOut.Reset()
	require.Equal(t, 2, run(context.Background(), []string{"mcp"}, &out, &errOut))
	require.Contains(t, errOut.String(), "exactly one of -upstream URL and -upstream-cmd")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-upstream", "http://x", "-record-timeout", "0s"}, "-record-timeout must be between 0 and 60s"},
		{[]string{"-upstream", "http://x", "-wait", "final"}, `-wait is provisional or nothing, not "final"`},
		{[]string{"-upstream", "http://x", "-bindings-refresh", "-1s"}, "-bindings-refresh must be positive"},
		{[]string{"-upstream-cmd", "x", "-upstream-header", "A: b"}, "-upstream-header only goes with -upstream URL"},
		{[]string{"-upstream", "http://x", "-upstream-header", "nocolon"}, `is not "Name: value"`},
		{[]string{"-upstream", "http://x", "-call-timeout", "0s"}, "-call-timeout must be positive"},
		{[]string{"-upstream", "http://x", "-max-message", "10"}, "-max-message must be at least 1024"},
	} {
		errOut.Reset()
		require.Equal(t, 2, run(context.Background(), append([]string{"mcp"}, c.args...), &out, &errOut), "%v", c.args)
		require.Contains(t, errOut.String(), c.want, "%v", c.args)
	}
}

// TestMCPGatewayOnDevServer: an agent (the go-sdk client) calls a bound
// tool through the gateway with -wait provisional, against the real API
// and worker: a payout the ledger shows answers as the upstream said; one
// it does not is told FAIL in the tool result, with the finding and its
// hint. The tenant key reaches neither the upstream, the gateway's logs, a
// result nor a verification's history.
func TestMCPGatewayOnDevServer(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true})
	key := s.tenant()
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_mcp", "1h", "1h")+`bindings:
  - tool: send_payout
    subject: "'account:' + args.account_id"
    params: {amount: args.amount}
`, 201, nil)
	now := time.Now().UTC()
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("account_opened", "account:acc_m1", "acc-m1-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("account_opened", "account:acc_m2", "acc-m2-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("payout_sent", "account:acc_m1", "po-m1", now.Add(30*time.Second), map[string]any{"payout_id": "po_m1", "amount": 700}),
	}}, 200, nil)

	// The upstream: a payouts MCP server that says every payout was sent.
	up := mcp.NewServer(&mcp.Implementation{Name: "payouts", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "send_payout", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"sent"}`}}}, nil
		})
	var mu sync.Mutex
	var upstreamSaw bytes.Buffer
	uh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		_ = r.Header.Write(&upstreamSaw)
		mu.Unlock()
		uh.ServeHTTP(w, r)
	}))
	t.Cleanup(upSrv.Close)

	c, err := client.New(s.m.URL(), key, client.WithHTTPClient(&http.Client{Timeout: time.Minute}))
	require.NoError(t, err)
	logs := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := mcpgw.New(ctx, mcpgw.Config{Recorder: &mcpgw.APIRecorder{Client: c}, Wait: true, WaitTimeout: 30 * time.Second,
		Upstream: mcpgw.Upstream{URL: upSrv.URL},
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)

	agent := mcp.NewClient(&mcp.Implementation{Name: "treasury-agent", Version: "1"}, nil)
	cs, err := agent.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw.URL}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	call := func(account string, amount int) []string {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_payout", Arguments: map[string]any{"account_id": account, "amount": amount}})
		require.NoError(t, err)
		var out []string
		for _, ct := range res.Content {
			out = append(out, ct.(*mcp.TextContent).Text)
		}
		return out
	}
	require.Equal(t, []string{`{"status":"sent"}`}, call("acc_m1", 700), "PASS: the upstream's answer as it was")
	failed := call("acc_m2", 900)
	require.Len(t, failed, 2, "%v", failed)
	require.Contains(t, failed[1], "did NOT verify")
	require.Contains(t, failed[1], "missing_effect payout")
	require.Contains(t, failed[1], "(hint: human_review")

	ids := s.boundActions(key, "payout_mcp")
	require.Len(t, ids, 2)
	tenant := tenantOfKey(s, key)
	var histories strings.Builder
	for _, id := range ids {
		var v actionView
		s.do(key, "GET", "/v1/actions/"+id, nil, 200, &v)
		require.Equal(t, "treasury-agent", v.Action.Agent)
		require.NotNil(t, v.Verdict)
		if v.Action.Subject == "account:acc_m2" {
			require.Equal(t, commitlayer.StatusFail, v.Verdict.Status)
			require.Contains(t, failed[1], id)
		} else {
			require.Equal(t, commitlayer.StatusPass, v.Verdict.Status)
		}
		raw, err := protojson.Marshal(fetchHistory(t, s, workflows.VerifyWorkflowID(tenant, id)))
		require.NoError(t, err)
		histories.Write(raw)
	}
	require.NotEmpty(t, histories.String())
	mu.Lock()
	saw := upstreamSaw.String()
	mu.Unlock()
	for name, where := range map[string]string{"upstream requests": saw, "gateway logs": logs.String(),
		"results": strings.Join(failed, "\n"), "histories": histories.String()} {
		require.NotContains(t, where, key, "the tenant key in the %s", name)
	}
	require.Contains(t, logs.String(), "action recorded", fmt.Sprintf("logs: %s", logs.String()))
}
