package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/workflows"
)

// factsArrivedSignals counts the new-facts signals in a verification's
// history.
func factsArrivedSignals(t *testing.T, s *stack, wfID string) int {
	t.Helper()
	n := 0
	for _, e := range fetchHistory(t, s, wfID).GetEvents() {
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == workflows.SignalFactsArrived {
			n++
		}
	}
	return n
}

// TestWatchIsWokenOnlyByFactsThatChangeItsVerdict: on the dev server, a
// settled verification watching its account is not woken by a note on it
// (the notice's digest says facts of that kind cannot change its contract's
// verdict, and its verdict is settled: no signal in its history); the
// payout's return is a reversal, which wakes it and turns its verdict to
// FAIL.
func TestWatchIsWokenOnlyByFactsThatChangeItsVerdict(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true})
	key := s.tenant()
	tenantID := tenantOfKey(s, key)
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_watch", "1s", "2m"), 201, nil)
	now := time.Now().UTC()
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("account_opened", "account:acc_1", "open-1", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("payout_sent", "account:acc_1", "po-1", now.Add(time.Second), map[string]any{"payout_id": "1", "amount": 100}),
	}}, 200, nil)
	var created struct {
		ID string `json:"id"`
	}
	s.do(key, "POST", "/v1/actions", map[string]any{
		"contract": "payout_watch", "agent": "agent-1", "subject": "account:acc_1",
		"params": map[string]any{"amount": 100}, "requested_at": now.Format(time.RFC3339Nano),
		"claim": map[string]string{"status": "success"},
	}, 202, &created)
	s.waitVerdict(key, created.ID, 30*time.Second, func(h []commitlayer.Verdict) bool {
		return len(h) > 0 && !h[len(h)-1].Provisional && h[len(h)-1].Status == commitlayer.StatusPass
	})
	wfID := workflows.VerifyWorkflowID(tenantID, created.ID)
	outboxEmpty := func() bool {
		var n int
		err := s.m.DB.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM fact_notifications WHERE tenant_id = $1`, tenantID).Scan(&n)
		return err == nil && n == 0
	}
	require.Eventually(t, outboxEmpty, 30*time.Second, 20*time.Millisecond)
	before := factsArrivedSignals(t, s, wfID)

	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("note_added", "account:acc_1", "note-1", time.Now().UTC(), map[string]any{"text": "customer called"}),
	}}, 200, nil)
	require.Eventually(t, outboxEmpty, 30*time.Second, 20*time.Millisecond, "the note's notice was never delivered")
	require.Equal(t, before, factsArrivedSignals(t, s, wfID), "a note that changes nothing woke the verification")

	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("payout_returned", "account:acc_1", "po-1-returned", time.Now().UTC(), map[string]any{"payout_id": "1", "amount": 100}),
	}}, 200, nil)
	h := s.waitVerdict(key, created.ID, 30*time.Second, func(h []commitlayer.Verdict) bool {
		return h[len(h)-1].Status == commitlayer.StatusFail
	})
	require.False(t, h[len(h)-1].Provisional)
	require.Equal(t, before+1, factsArrivedSignals(t, s, wfID), "the reversal woke it once")
}
