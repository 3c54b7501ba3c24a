package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// otlpToolSpan is an OTLP/JSON export of one invoke_agent span and its
// execute_tool child, as an OpenTelemetry SDK's exporter sends it.
func otlpToolSpan(traceID, spanID string, start time.Time, account string, amount int) string {
	ns := func(t time.Time) string { return fmt.Sprint(t.UnixNano()) }
	return fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[
  {"key":"service.name","value":{"stringValue":"payout-service"}}]},
 "scopeSpans":[{"scope":{"name":"agent-sdk"},"spans":[
  {"traceId":%q,"spanId":"aaaaaaaaaaaaaaaa","name":"invoke_agent treasurer","kind":1,
   "startTimeUnixNano":%q,"endTimeUnixNano":%q,
   "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"invoke_agent"}},
                 {"key":"gen_ai.agent.name","value":{"stringValue":"treasurer"}}]},
  {"traceId":%q,"spanId":%q,"parentSpanId":"aaaaaaaaaaaaaaaa","name":"execute_tool send_payout","kind":1,
   "startTimeUnixNano":%q,"endTimeUnixNano":%q,
   "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},
                 {"key":"gen_ai.tool.name","value":{"stringValue":"send_payout"}},
                 {"key":"gen_ai.tool.call.id","value":{"stringValue":"call_%s"}},
                 {"key":"gen_ai.tool.call.arguments","value":{"stringValue":%q}},
                 {"key":"gen_ai.tool.call.result","value":{"stringValue":"{\"status\":\"sent\"}"}}],
   "status":{}}]}]}]}`,
		traceID, ns(start.Add(-time.Second)), ns(start.Add(time.Second)),
		traceID, spanID, ns(start), ns(start.Add(500*time.Millisecond)), spanID,
		fmt.Sprintf(`{"account_id":%q,"amount":%d,"currency":"USD"}`, account, amount))
}

func (s *stack) postOTLP(key, body string) string {
	s.t.Helper()
	req, err := http.NewRequest("POST", s.m.URL()+"/v1/traces", strings.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, "%s", raw)
	return string(raw)
}

// TestTracesToVerdictOnDevServer: one OTLP/JSON execute_tool span of a
// bound tool, posted twice, is one action with the bound subject and
// params, verified by VerifyAction on the dev server: PASS when the ledger
// shows the payout, FAIL when it does not.
func TestTracesToVerdictOnDevServer(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true})
	key := s.tenant()
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_bound", "1h", "1h")+`bindings:
  - tool: send_payout
    subject: "'account:' + args.account_id"
    params: {amount: args.amount, currency: args.currency}
`, 201, nil)
	now := time.Now().UTC()
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("account_opened", "account:acc_t1", "acc-t1-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("account_opened", "account:acc_t2", "acc-t2-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("payout_sent", "account:acc_t1", "po-t1", now.Add(time.Second), map[string]any{"payout_id": "po_t1", "amount": 700}),
	}}, 200, nil)

	traceID := randHex(16)
	body := otlpToolSpan(traceID, "bbbbbbbbbbbbbbbb", now, "acc_t1", 700)
	require.JSONEq(t, `{}`, s.postOTLP(key, body), "accepted in full: partial_success unset")
	require.JSONEq(t, `{}`, s.postOTLP(key, body), "the exporter's retry")

	ids := s.boundActions(key, "payout_bound")
	require.Len(t, ids, 1, "posted twice, recorded once")
	var v actionView
	s.do(key, "GET", "/v1/actions/"+ids[0], nil, 200, &v)
	require.Equal(t, commitlayer.Subject("account:acc_t1"), v.Action.Subject)
	require.Equal(t, commitlayer.Attrs{"amount": int64(700), "currency": "USD"}, v.Action.Params)
	require.Equal(t, "treasurer", v.Action.Agent)
	require.Equal(t, commitlayer.ClaimSuccess, v.Action.Claim.Status)
	h := s.waitVerdict(key, ids[0], 30*time.Second, func(h []commitlayer.Verdict) bool { return len(h) > 0 })
	require.Equal(t, commitlayer.StatusPass, h[0].Status, "%+v", h[0])

	// The same call on an account whose ledger shows no payout: FAIL.
	s.postOTLP(key, otlpToolSpan(traceID, "cccccccccccccccc", now, "acc_t2", 900))
	ids = s.boundActions(key, "payout_bound")
	require.Len(t, ids, 2)
	for _, id := range ids {
		s.do(key, "GET", "/v1/actions/"+id, nil, 200, &v)
		if v.Action.Subject != "account:acc_t2" {
			continue
		}
		h := s.waitVerdict(key, id, 30*time.Second, func(h []commitlayer.Verdict) bool { return len(h) > 0 })
		require.Equal(t, commitlayer.StatusFail, h[0].Status, "%+v", h[0])
		require.Equal(t, commitlayer.CodeMissingEffect, h[0].Findings[0].Code)
		return
	}
	t.Fatalf("no action on account:acc_t2 among %v", ids)
}

// boundActions lists the ids of the tenant's actions of a contract, read
// from the store (the ingest answers no ids: OTLP's answer has none).
func (s *stack) boundActions(key, contract string) []string {
	s.t.Helper()
	tenant := tenantOfKey(s, key)
	rows, err := s.m.DB.ActionsOfContract(s.t.Context(), tenant, contract, time.Now().Add(-24*time.Hour))
	require.NoError(s.t, err)
	var ids []string
	for _, a := range rows {
		ids = append(ids, a.ID)
	}
	return ids
}
