package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// The current verdict on the actions row follows every append (the
// trigger), pages are a keyset that ties break by id, and stats count per
// bucket, contract and agent.
func TestListActionsAndStats(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	other := newTenant(t)

	// Five actions at the same instant (ties broken by id) and one later.
	var ids []string
	for i := range 5 {
		rec, _, err := db.CreateAction(ctx, tn.ID, mkAction(fmt.Sprintf("act_same_%d", i), "order:o_1", t0), t0, t0.Add(time.Hour), "", nil)
		require.NoError(t, err)
		ids = append(ids, rec.ID)
	}
	later, _, err := db.CreateAction(ctx, tn.ID, mkAction("act_later", "order:o_2", t0.Add(90*time.Minute)), t0, t0.Add(time.Hour), "", nil)
	require.NoError(t, err)
	_, _, err = db.CreateAction(ctx, other.ID, mkAction("act_same_0", "order:o_1", t0), t0, t0.Add(time.Hour), "", nil)
	require.NoError(t, err)

	_, _, err = db.AppendVerdict(ctx, tn.ID, mkVerdict(ids[1], commitlayer.StatusPass, t0))
	require.NoError(t, err)
	final := mkVerdict(ids[1], commitlayer.StatusFail, t0)
	final.Provisional = false
	_, _, err = db.AppendVerdict(ctx, tn.ID, final)
	require.NoError(t, err)
	_, _, err = db.AppendVerdict(ctx, tn.ID, mkVerdict(ids[3], commitlayer.StatusUnknown, t0))
	require.NoError(t, err)

	page, err := db.ListActions(ctx, tn.ID, commitlayer.ActionFilter{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{later.ID, "act_same_4"}, listIDs(page))
	require.NotNil(t, page.Next)
	var walked []string
	f := commitlayer.ActionFilter{Limit: 2}
	for {
		p, err := db.ListActions(ctx, tn.ID, f)
		require.NoError(t, err)
		walked = append(walked, listIDs(p)...)
		if p.Next == nil {
			break
		}
		f.After = p.Next
	}
	require.Equal(t, []string{"act_later", "act_same_4", "act_same_3", "act_same_2", "act_same_1", "act_same_0"}, walked)

	fails, err := db.ListActions(ctx, tn.ID, commitlayer.ActionFilter{Status: "FAIL"})
	require.NoError(t, err)
	require.Equal(t, []string{ids[1]}, listIDs(fails))
	require.Equal(t, 2, fails.Actions[0].Verdict.Version, "the latest verdict")
	require.False(t, fails.Actions[0].Verdict.Provisional)
	pending, err := db.ListActions(ctx, tn.ID, commitlayer.ActionFilter{Status: commitlayer.VerdictPending})
	require.NoError(t, err)
	require.Equal(t, []string{"act_later", "act_same_4", "act_same_2", "act_same_0"}, listIDs(pending))
	for _, it := range pending.Actions {
		require.Nil(t, it.Verdict)
	}
	yes, no := true, false
	prov, err := db.ListActions(ctx, tn.ID, commitlayer.ActionFilter{Provisional: &yes})
	require.NoError(t, err)
	require.Equal(t, []string{ids[3]}, listIDs(prov))
	settled, err := db.ListActions(ctx, tn.ID, commitlayer.ActionFilter{Provisional: &no})
	require.NoError(t, err)
	require.Equal(t, []string{ids[1]}, listIDs(settled))
	win, err := db.ListActions(ctx, tn.ID, commitlayer.ActionFilter{Since: t0.Add(time.Minute), Subject: "order:o_2"})
	require.NoError(t, err)
	require.Equal(t, []string{"act_later"}, listIDs(win))
	_, err = db.ListActions(ctx, tn.ID, commitlayer.ActionFilter{Status: "MAYBE"})
	require.ErrorIs(t, err, commitlayer.ErrInvalid)

	rows, err := db.ActionStats(ctx, tn.ID, commitlayer.StatsQuery{Bucket: time.Hour, Since: t0, Until: t0.Add(3 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, []commitlayer.StatsRow{
		{Start: t0, Contract: "refund_customer", Agent: "agent-1", Counts: commitlayer.StatusCounts{Fail: 1, Unknown: 1, Pending: 3}},
		{Start: t0.Add(time.Hour), Contract: "refund_customer", Agent: "agent-1", Counts: commitlayer.StatusCounts{Pending: 1}},
	}, rows)
	for _, q := range []commitlayer.StatsQuery{
		{Bucket: time.Millisecond, Since: t0, Until: t0.Add(time.Hour)},
		{Bucket: time.Hour, Since: t0, Until: t0},
		{Bucket: time.Second, Since: t0, Until: t0.Add(24 * time.Hour)},
	} {
		_, err := db.ActionStats(ctx, tn.ID, q)
		require.ErrorIs(t, err, commitlayer.ErrInvalid, "%+v", q)
	}

	// Evidence by external id, across the given sources only.
	_, err = db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o_1", "re_1", t0, commitlayer.Attrs{"amount": int64(2500)}),
		mkFact("orders", "order_status_changed", "order:o_1", "re_1", t0, commitlayer.Attrs{"status": "refunded"}),
		mkFact("payments", "refund_created", "order:o_1", "re_2", t0.Add(time.Minute), nil),
	})
	require.NoError(t, err)
	facts, err := db.FactsByExternalIDs(ctx, tn.ID, []string{"payments", "orders"}, []string{"re_1", "re_9"})
	require.NoError(t, err)
	require.Len(t, facts, 2)
	facts, err = db.FactsByExternalIDs(ctx, tn.ID, []string{"payments"}, []string{"re_1", "re_2"})
	require.NoError(t, err)
	require.Equal(t, []string{"re_1", "re_2"}, externalIDs(facts))
	facts, err = db.FactsByExternalIDs(ctx, other.ID, []string{"payments"}, []string{"re_1"})
	require.NoError(t, err)
	require.Empty(t, facts, "another tenant's")
}

func listIDs(p commitlayer.ActionPage) []string {
	out := make([]string, len(p.Actions))
	for i, it := range p.Actions {
		out[i] = it.Action.ID
	}
	return out
}
