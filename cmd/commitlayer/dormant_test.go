package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/workflows"
)

// asleepRun waits until the verification's current run sleeps outside the
// worker (workflows/dormant.go): a run whose history holds its start
// alone (no workflow task was ever scheduled for it) and whose first task
// is delayed to about until. It returns the run's id.
func (s *stack) asleepRun(wfID string, until time.Time, timeout time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d, err := s.m.Temporal.DescribeWorkflow(context.Background(), wfID, "")
		require.NoError(s.t, err)
		info := d.RawResponse.GetWorkflowExecutionInfo()
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && info.GetHistoryLength() == 1 {
			at := info.GetExecutionTime().AsTime()
			require.WithinDuration(s.t, until, at, 10*time.Second, "the sleeping run starts at its deadline")
			return info.GetExecution().GetRunId()
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not asleep within %s (status %s, %d events)", wfID, timeout, info.GetStatus(), info.GetHistoryLength())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runHistory is a run's whole history.
func (s *stack) runHistory(wfID, runID string) *historypb.History {
	s.t.Helper()
	it := s.m.Temporal.GetWorkflowHistory(context.Background(), wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(s.t, err)
		h.Events = append(h.Events, e)
	}
	return &h
}

// TestVerificationSleepsOutsideTheWorker: a product verification old enough
// sleeps through its watch as a run with no workflow task, and everything
// that must reach it still does — a reversal's facts (the notice goes by
// signal-with-start), a recheck and a wait for the final verdict (updates)
// — each time back to sleep until the same deadline.
func TestVerificationSleepsOutsideTheWorker(t *testing.T) {
	s := newStackWith(t, Roles{API: true, Worker: true}, testenv.TemporalAddress(t), map[string]string{
		"COMMITLAYER_DORMANT_AFTER":   "1m",
		"COMMITLAYER_DORMANT_MIN_AGE": "4s",
	})
	key := s.tenant()
	tenantID := tenantOfKey(s, key)
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_sleepy", "1s", "1h"), 201, nil)
	now := time.Now().UTC()
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("account_opened", "account:acc_z", "acc-z-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("payout_sent", "account:acc_z", "po-z", now.Add(time.Second), map[string]any{"payout_id": "po_z", "amount": 900}),
	}}, 200, nil)
	a := commitlayer.Action{Contract: "payout_sleepy", Agent: "agent-1", Subject: "account:acc_z",
		Params: commitlayer.Attrs{"amount": 900}, RequestedAt: now, Claim: commitlayer.Claim{Status: "success"}}
	c, err := client.New(s.m.URL(), key)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acc, err := c.RecordAction(ctx, a, client.RecordOptions{IdempotencyKey: "sleepy-1"})
	require.NoError(t, err)
	wfID := workflows.VerifyWorkflowID(tenantID, acc.ID)
	watchUntil := now.Add(time.Second + time.Hour)

	h := s.waitVerdict(key, acc.ID, 30*time.Second, func(h []commitlayer.Verdict) bool { return len(h) >= 2 })
	require.False(t, h[1].Provisional)
	require.Equal(t, commitlayer.StatusPass, h[1].Status)

	// Asleep once 4 s old: the run that was awake continued as new.
	first, err := s.m.Temporal.DescribeWorkflow(ctx, wfID, "")
	require.NoError(t, err)
	firstRun := first.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if first.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength() == 1 {
		firstRun = first.RawResponse.GetWorkflowExecutionInfo().GetFirstRunId()
	}
	r1 := s.asleepRun(wfID, watchUntil, 30*time.Second)
	require.NotEqual(t, firstRun, r1)
	awake := s.runHistory(wfID, firstRun)
	last := awake.Events[len(awake.Events)-1]
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, last.GetEventType())
	require.Equal(t, r1, last.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId())

	// A reversal: its notice wakes the sleeping run, which flips the
	// verdict and goes back to sleep.
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("payout_returned", "account:acc_z", "po-z-returned", time.Now().UTC(), map[string]any{"payout_id": "po_z", "amount": 900}),
	}}, 200, nil)
	h = s.waitVerdict(key, acc.ID, 30*time.Second, func(h []commitlayer.Verdict) bool {
		return h[len(h)-1].Status == commitlayer.StatusFail
	})
	require.Equal(t, commitlayer.CodeEffectReversed, h[len(h)-1].Findings[0].Code)
	r2 := s.asleepRun(wfID, watchUntil, 30*time.Second)
	require.NotEqual(t, r1, r2)
	woken := s.runHistory(wfID, r1)
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, woken.Events[1].GetEventType(), "woken by the notice's signal-with-start")

	// A recheck reaches the sleeping run (an update), answers, and it
	// sleeps again.
	var rc struct {
		Verdict commitlayer.Verdict `json:"verdict"`
	}
	s.do(key, "POST", "/v1/actions/"+acc.ID+"/recheck", nil, 200, &rc)
	require.Equal(t, commitlayer.StatusFail, rc.Verdict.Status)
	r3 := s.asleepRun(wfID, watchUntil, 30*time.Second)
	require.NotEqual(t, r2, r3)

	// So does a wait for the final verdict (update-with-start).
	acc2, final, err := c.RecordAndWait(ctx, a, client.Final, client.RecordOptions{IdempotencyKey: "sleepy-1", WaitTimeout: 30 * time.Second})
	require.NoError(t, err)
	require.True(t, acc2.Replayed)
	require.Equal(t, commitlayer.StatusFail, final.Status)
	require.False(t, final.Provisional)
	s.asleepRun(wfID, watchUntil, 30*time.Second)

	// The verdicts were stored once each: provisional, final, reversed.
	var v actionView
	s.do(key, "GET", "/v1/actions/"+acc.ID, nil, 200, &v)
	require.Len(t, v.History, 3)
	if *recordHistories {
		writeHistory(t, awake, "workflows", "verify_dormant_first.json")
		writeHistory(t, woken, "workflows", "verify_dormant_woken.json")
	}
	require.NoError(t, s.m.Temporal.TerminateWorkflow(context.Background(), wfID, "", "test done"))
}
