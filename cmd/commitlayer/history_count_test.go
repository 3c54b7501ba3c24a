package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/workflows"
)

// historyCost is what one workflow run cost Temporal: its history events
// and its billable actions under the model in billableActions.
type historyCost struct {
	Events  int
	Actions int
	ByType  map[string]int
}

func (c historyCost) String() string {
	keys := make([]string, 0, len(c.ByType))
	for k := range c.ByType {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, c.ByType[k])
	}
	return fmt.Sprintf("%d events, %d billable actions (%s)", c.Events, c.Actions, strings.Join(parts, ", "))
}

// billableActions counts a history's Temporal Cloud actions, as Temporal's
// page "Temporal Cloud Actions" lists them (docs.temporal.io/cloud/actions):
// a workflow started (client start, continue-as-new, child start) 1; a
// timer started 1; a search-attribute upsert 1 (the SDK's own
// TemporalChangeVersion upsert for GetVersion is exempt); a signal 1
// (received from a client, or sent by this workflow); an activity
// scheduled 1 (retries would add one each); the local activities of one
// workflow task 1 together; an update accepted 1 (rejected ones too, but
// they leave no event). Queries leave no event and are not counted. Version
// markers and memo changes are not actions.
func billableActions(h *historypb.History) historyCost {
	c := historyCost{ByType: map[string]int{}}
	laTasks := map[int64]bool{}
	var task int64 // the workflow task whose completion the events follow
	for _, e := range h.GetEvents() {
		c.Events++
		c.ByType[e.GetEventType().String()]++
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			enumspb.EVENT_TYPE_TIMER_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			c.Actions++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			fields := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, onlyVersion := fields["TemporalChangeVersion"]; !onlyVersion || len(fields) > 1 {
				c.Actions++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			task = e.GetEventId()
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" && !laTasks[task] {
				laTasks[task] = true
				c.Actions++
			}
		}
	}
	return c
}

func fetchHistory(t *testing.T, s *stack, workflowID string) *historypb.History {
	t.Helper()
	it := s.m.Temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, e)
	}
	return &h
}

// TestHistoryEventsPerVerification counts what a verification costs
// Temporal on the product path (POST /v1/actions, no benchmark signals):
// a clean PASS with no watch after its window (the compact-history target: at most 20
// events), a clean PASS with a watch, and a reversal during the watch.
// With -record-histories it records the first and the last for the replay
// tests. Run with -v for the counts (docs/benchmarks.md).
func TestHistoryEventsPerVerification(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true})
	key := s.tenant()
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_nowatch", "2s", "0s"), 201, nil)
	s.do(key, "POST", "/v1/contracts", payoutContract("payout_watch", "2s", "5s"), 201, nil)
	now := time.Now().UTC()
	var facts []any
	for i := range 3 {
		acc := fmt.Sprintf("account:acc_%d", i)
		facts = append(facts,
			fact("account_opened", acc, fmt.Sprintf("open-%d", i), now.Add(-time.Hour), map[string]any{"status": "active"}),
			fact("payout_sent", acc, fmt.Sprintf("po-%d", i), now.Add(time.Second), map[string]any{"payout_id": fmt.Sprint(i), "amount": 100}))
	}
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": facts}, 200, nil)
	// POST /v1/facts answers before its notice goes out: let it go (to no
	// verification yet) before the actions, so it wakes none of the ones
	// counted here.
	tenantID := tenantOfKey(s, key)
	require.Eventually(t, func() bool {
		var n int
		err := s.m.DB.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM fact_notifications WHERE tenant_id = $1`, tenantID).Scan(&n)
		return err == nil && n == 0
	}, 30*time.Second, 20*time.Millisecond, "the facts' notice was never delivered")
	post := func(contract string, i int) string {
		var created struct {
			ID string `json:"id"`
		}
		s.do(key, "POST", "/v1/actions", map[string]any{
			"contract": contract, "agent": "agent-1", "subject": fmt.Sprintf("account:acc_%d", i),
			"params": map[string]any{"amount": 100}, "requested_at": now.Format(time.RFC3339Nano),
			"claim": map[string]string{"status": "success"},
		}, 202, &created)
		return created.ID
	}
	clean, watched, reversed := post("payout_nowatch", 0), post("payout_watch", 1), post("payout_watch", 2)

	// The reversal: once acc_2's verdict is final, its payout comes back.
	s.waitVerdict(key, reversed, 30*time.Second, func(h []commitlayer.Verdict) bool {
		return len(h) >= 2 && !h[len(h)-1].Provisional
	})
	s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("payout_returned", "account:acc_2", "po-2-returned", time.Now().UTC(), map[string]any{"payout_id": "2", "amount": 100}),
	}}, 200, nil)

	costs := map[string]historyCost{}
	histories := map[string]*historypb.History{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, id := range map[string]string{"clean PASS, no watch": clean, "clean PASS, 5 s watch": watched, "reversal during the watch": reversed} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var res workflows.VerifyActionResult
			wfID := workflows.VerifyWorkflowID(tenantID, id)
			if err := s.m.Temporal.GetWorkflow(ctx, wfID, "").Get(ctx, &res); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			h := fetchHistory(t, s, wfID)
			mu.Lock()
			defer mu.Unlock()
			costs[name], histories[name] = billableActions(h), h
		}()
	}
	wg.Wait()
	require.Len(t, costs, 3)
	for _, name := range []string{"clean PASS, no watch", "clean PASS, 5 s watch", "reversal during the watch"} {
		t.Logf("%s: %s", name, costs[name])
	}

	c := costs["clean PASS, no watch"]
	require.LessOrEqual(t, c.Events, 20, "a clean PASS: %s", c)
	require.Zero(t, c.ByType[enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED.String()], "no memo: the verdict is published once")
	for name, h := range histories {
		for _, e := range h.GetEvents() {
			if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == workflows.SignalFactsArrived {
				for _, p := range a.GetInput().GetPayloads() {
					require.NotContains(t, string(p.GetData()), "Subjects", "%s: the new-facts signal carries no subject list", name)
				}
			}
		}
		// One search-attribute upsert per verdict change (the SDK's own
		// TemporalChangeVersion upsert aside).
		upserts := 0
		for _, e := range h.GetEvents() {
			if a := e.GetUpsertWorkflowSearchAttributesEventAttributes(); a != nil {
				if _, v := a.GetSearchAttributes().GetIndexedFields()["TemporalChangeVersion"]; !v {
					upserts++
				}
			}
		}
		id := map[string]string{"clean PASS, no watch": clean, "clean PASS, 5 s watch": watched, "reversal during the watch": reversed}[name]
		hist, err := s.m.DB.VerdictHistory(context.Background(), tenantID, id)
		require.NoError(t, err)
		require.Equal(t, len(hist), upserts, "%s: one upsert per stored verdict version", name)
		var unmeasured int
		require.NoError(t, s.m.DB.Pool().QueryRow(context.Background(), `SELECT count(*) FROM verdicts
			WHERE tenant_id = $1 AND action_id = $2 AND pass_us IS NULL`, tenantID, id).Scan(&unmeasured))
		require.Zero(t, unmeasured, "%s: every verdict keeps its pass's time", name)
	}
	rv := costs["reversal during the watch"]
	require.Equal(t, 1, rv.ByType[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED.String()], "the reversal arrived as one signal")

	if *recordHistories {
		writeHistory(t, histories["clean PASS, no watch"], "workflows", "verify_lean_clean_pass.json")
		writeHistory(t, histories["reversal during the watch"], "workflows", "verify_lean_reversal.json")
	}
}
