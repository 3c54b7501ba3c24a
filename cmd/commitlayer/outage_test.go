package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
)

// TestNothingLostWhileTemporalIsDown stops a Temporal server of the test's
// own while verifications watch, and while it is down posts a reversal of
// a verified payout and records ten new actions. The API answers at once
// (200 for the facts, 202 "pending" for the actions); after the server
// comes back the reversal reaches its verification (FAIL) and every action
// is verified, with no resend by the client.
func TestNothingLostWhileTemporalIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and starts a Temporal dev server")
	}
	dev := testenv.StartDevServer(t)
	s := newStackOn(t, Roles{API: true, Worker: true}, dev.Address())
	key := s.tenant()
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_outage", "2s", "10m"), 201, nil)

	now := time.Now().UTC()
	facts := []any{fact("account_opened", "account:acc_0", "acc-0-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("payout_sent", "account:acc_0", "po-0", now.Add(time.Second), map[string]any{"payout_id": "po_0", "amount": 5000})}
	for i := 1; i <= 10; i++ {
		facts = append(facts, fact("account_opened", fmt.Sprintf("account:acc_%d", i), fmt.Sprintf("acc-%d-opened", i),
			now.Add(-time.Hour), map[string]any{"status": "active"}))
	}
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": facts}, 200, nil)
	var created struct {
		ID           string `json:"id"`
		Verification string `json:"verification"`
	}
	s.do(key, "POST", "/v1/actions", map[string]any{
		"contract": "payout_outage", "agent": "agent-1", "subject": "account:acc_0",
		"params": map[string]any{"amount": 5000}, "requested_at": now.Format(time.RFC3339Nano),
		"claim": map[string]string{"status": "success"},
	}, 202, &created)
	require.Equal(t, "started", created.Verification)
	s.waitVerdict(key, created.ID, time.Minute, func(h []commitlayer.Verdict) bool {
		return len(h) > 0 && !h[len(h)-1].Provisional && h[len(h)-1].Status == commitlayer.StatusPass
	})

	dev.Stop()
	// The reversal is stored with its notice; Temporal cannot be told now.
	began := time.Now()
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("payout_returned", "account:acc_0", "po-0-returned", time.Now().UTC(), map[string]any{"payout_id": "po_0", "amount": 5000}),
	}}, 200, nil)
	var ids []string
	for i := 1; i <= 10; i++ {
		at := time.Now().UTC()
		var a struct {
			ID           string `json:"id"`
			Verification string `json:"verification"`
		}
		path := "/v1/actions"
		if i%2 == 0 {
			path += "?wait=final&timeout=3" // a gate: no verdict to wait for, 202 pending all the same
		}
		s.do(key, "POST", path, map[string]any{
			"contract": "payout_outage", "agent": "agent-1", "subject": fmt.Sprintf("account:acc_%d", i),
			"params": map[string]any{"amount": 100}, "requested_at": at.Format(time.RFC3339Nano),
			"claim": map[string]string{"status": "success"},
		}, 202, &a)
		require.Equal(t, "pending", a.Verification, "Temporal is down: the start is left to the reconciler")
		ids = append(ids, a.ID)
	}
	t.Logf("11 requests answered in %s with Temporal down", time.Since(began).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	dev.Start()

	h := s.waitVerdict(key, created.ID, 2*time.Minute, func(h []commitlayer.Verdict) bool {
		return h[len(h)-1].Status == commitlayer.StatusFail
	})
	require.Equal(t, commitlayer.CodeEffectReversed, h[len(h)-1].Findings[0].Code)
	for _, id := range ids {
		// No payout was sent: an action contract with its source connected
		// says FAIL (missing effect) — what matters is that a verdict came.
		s.waitVerdict(key, id, 2*time.Minute, func(h []commitlayer.Verdict) bool { return len(h) > 0 })
	}
	n, err := s.m.DB.PendingNotifications(t.Context(), tenantOfKey(s, key))
	require.NoError(t, err)
	require.Zero(t, n, "every notice delivered")
}
