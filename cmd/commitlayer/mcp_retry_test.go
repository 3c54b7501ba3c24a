package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/mcpgw"
)

// TestMCPRetryThatSucceedsIsNotToldFail: the agent's first call answers
// isError and writes nothing; its retry writes the payout and succeeds.
// Through the gateway with -wait provisional on the real API and worker,
// the agent is not told FAIL for the retry (its verdict comes from a pass
// that began after the retry was recorded); the chain is one action
// claiming success, both attempts in its trace, and its final verdict is
// PASS with claim_contradicted false.
func TestMCPRetryThatSucceedsIsNotToldFail(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true})
	key := s.tenant()
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_retry", "3s", "1m")+`bindings:
  - tool: send_payout
    subject: "'account:' + args.account_id"
    params: {amount: args.amount}
`, 201, nil)
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("account_opened", "account:acc_r1", "acc-r1-opened", time.Now().Add(-time.Hour), map[string]any{"status": "active"}),
	}}, 200, nil)

	// The upstream: the first payout times out and writes nothing; the
	// retry writes it to the ledger, then answers.
	var calls atomic.Int32
	up := mcp.NewServer(&mcp.Implementation{Name: "payouts", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "send_payout", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if calls.Add(1) == 1 {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "ledger timeout"}}}, nil
			}
			s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
				fact("payout_sent", "account:acc_r1", "po-r1", time.Now(), map[string]any{"payout_id": "po_r1", "amount": 700}),
			}}, 200, nil)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"sent"}`}}}, nil
		})
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upSrv.Close)

	c, err := client.New(s.m.URL(), key, client.WithHTTPClient(&http.Client{Timeout: time.Minute}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := mcpgw.New(ctx, mcpgw.Config{Recorder: &mcpgw.APIRecorder{Client: c}, Wait: true, WaitTimeout: 30 * time.Second,
		Upstream: mcpgw.Upstream{URL: upSrv.URL}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "treasury-agent", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw.URL}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	call := func() (*mcp.CallToolResult, string) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_payout", Arguments: map[string]any{"account_id": "acc_r1", "amount": 700}})
		require.NoError(t, err)
		var texts []string
		for _, ct := range res.Content {
			texts = append(texts, ct.(*mcp.TextContent).Text)
		}
		return res, strings.Join(texts, "\n")
	}
	res, text := call()
	require.True(t, res.IsError, "the first attempt failed: %s", text)
	res, text = call()
	require.False(t, res.IsError)
	require.Equal(t, `{"status":"sent"}`, text, "the retry is not told FAIL: the payout is in the ledger")

	ids := s.boundActions(key, "payout_retry")
	require.Len(t, ids, 1, "one action for the chain")
	var v actionView
	s.do(key, "GET", "/v1/actions/"+ids[0]+"?wait=final&timeout=30", nil, 200, &v)
	require.Equal(t, commitlayer.ClaimSuccess, v.Action.Claim.Status, "the chain claims its last attempt's success")
	var trace []map[string]string
	require.NoError(t, json.Unmarshal(v.Action.Trace, &trace))
	require.Len(t, trace, 2, "both attempts in the trace")
	require.Equal(t, []string{"failure", "success"}, []string{trace[0]["claim"], trace[1]["claim"]})
	require.NotNil(t, v.Verdict)
	require.False(t, v.Verdict.Provisional, "%+v", v.Verdict)
	require.Equal(t, commitlayer.StatusPass, v.Verdict.Status, fmt.Sprintf("%+v", v.Verdict))
	require.False(t, v.Verdict.ClaimContradicted)
}
