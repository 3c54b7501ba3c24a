package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestReadPassIsTheSeparateReads: one batch answers what FactsAbout,
// PriorActions (each query), ConnectedSources and LatestVerdict answer
// one at a time, on a tenant with linked facts, several actions, two
// sources and a verdict history; and on an action with nothing yet.
func TestReadPassIsTheSeparateReads(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn, other := newTenant(t), newTenant(t)
	_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("payments", "refund", "order:o1", "re_1", t0, commitlayer.Attrs{"amount": int64(2500)}, "customer:c1"),
		mkFact("crm", "note", "customer:c1", "n_1", t0.Add(time.Second), commitlayer.Attrs{"text": "hi"}),
		mkFact("tickets", "comment", "ticket:t1", "tc_1", t0.Add(2*time.Second), nil, "order:o1"),
		mkFact("crm", "note", "customer:c2", "n_2", t0, nil),
	})
	require.NoError(t, err)
	_, err = testDB.InsertFacts(ctx, other.ID, []commitlayer.Fact{mkFact("payments", "refund", "order:o1", "re_x", t0, nil)})
	require.NoError(t, err)
	for i, a := range []commitlayer.Action{
		mkAction("act_1", "order:o1", t0),
		mkAction("act_2", "order:o1", t0.Add(time.Minute)),
		mkAction("act_3", "order:o2", t0.Add(2*time.Minute)),
	} {
		if i == 2 {
			a.Agent = "agent-2"
		}
		_, _, err := testDB.CreateAction(ctx, tn.ID, a, t0.Add(time.Hour), t0.Add(72*time.Hour), "", nil)
		require.NoError(t, err)
	}
	v := mkVerdict("act_1", commitlayer.StatusPass, t0)
	_, _, err = testDB.AppendVerdict(ctx, tn.ID, v)
	require.NoError(t, err)
	v.Status, v.Provisional = commitlayer.StatusFail, false
	latest, _, err := testDB.AppendVerdict(ctx, tn.ID, v)
	require.NoError(t, err)

	queries := []ActionQuery{
		{Contract: "refund_customer", Subject: "order:o1", From: t0, To: t0.Add(72 * time.Hour), ExcludeID: "act_1"},
		{Contract: "refund_customer", Agent: "agent-1", From: t0.Add(-time.Hour), To: t0.Add(time.Hour), ExcludeID: "act_1"},
		{Contract: "refund_customer", ExcludeID: "act_1"}, // both ends open
		{Contract: "other", ExcludeID: "act_1"},
	}
	got, err := testDB.ReadPass(ctx, tn.ID, PassReadRequest{ActionID: "act_1", Subject: "order:o1", Actions: queries})
	require.NoError(t, err)

	facts, err := testDB.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"order:o1"})
	require.NoError(t, err)
	require.Equal(t, facts, got.Facts)
	require.Equal(t, []string{"re_1", "n_1", "tc_1"}, externalIDs(got.Facts))
	require.Len(t, got.Actions, len(queries))
	for i, q := range queries {
		want, err := testDB.PriorActions(ctx, tn.ID, q.Contract, q.Agent, q.Subject, q.From, q.To, q.ExcludeID)
		require.NoError(t, err)
		require.Equal(t, want, got.Actions[i], "query %d", i)
	}
	require.Len(t, got.Actions[0], 1)
	require.Len(t, got.Actions[2], 2)
	require.Empty(t, got.Actions[3])
	connected, err := testDB.ConnectedSources(ctx, tn.ID)
	require.NoError(t, err)
	require.Equal(t, connected, got.Connected)
	require.Equal(t, []string{"crm", "payments", "tickets"}, got.Connected)
	require.NotNil(t, got.Latest)
	require.Equal(t, latest, *got.Latest)

	// An action with no verdict, on a subject with no facts.
	got, err = testDB.ReadPass(ctx, tn.ID, PassReadRequest{ActionID: "act_3", Subject: "order:o2"})
	require.NoError(t, err)
	require.Empty(t, got.Facts)
	require.Empty(t, got.Actions)
	require.Nil(t, got.Latest)

	_, err = testDB.ReadPass(ctx, tn.ID, PassReadRequest{ActionID: "act_1", Subject: "order:o1",
		Actions: []ActionQuery{{Contract: "refund_customer", From: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}})
	require.ErrorIs(t, err, commitlayer.ErrInvalid)
}

// TestAppendVerdictOver: the verdict read beside the pass's facts stands
// in for AppendVerdict's own read — the same answer stores nothing, a new
// one the next version, none read gives version 1 — and when another
// append stored a version after that read, it compares with that one.
func TestAppendVerdictOver(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_1", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)

	pass := mkVerdict("act_1", commitlayer.StatusPass, t0)
	v1, appended, err := testDB.AppendVerdictOver(ctx, tn.ID, pass, nil, 0)
	require.NoError(t, err)
	require.True(t, appended)
	require.Equal(t, 1, v1.Version)

	again := pass
	again.EvaluatedAt = t0.Add(time.Second)
	got, appended, err := testDB.AppendVerdictOver(ctx, tn.ID, again, &v1, 0)
	require.NoError(t, err)
	require.False(t, appended, "the same answer as the verdict read")
	require.Equal(t, v1, got)

	// Read v1; another append stores a FAIL; this pass's UNKNOWN loses
	// version 2 to it and is compared with it: version 3.
	fail := mkVerdict("act_1", commitlayer.StatusFail, t0.Add(time.Minute))
	v2, _, err := testDB.AppendVerdict(ctx, tn.ID, fail)
	require.NoError(t, err)
	got, appended, err = testDB.AppendVerdictOver(ctx, tn.ID, mkVerdict("act_1", commitlayer.StatusUnknown, t0), &v1, 0)
	require.NoError(t, err)
	require.True(t, appended)
	require.Equal(t, 3, got.Version)
	// Read v2 (FAIL) and found FAIL again while v3 (UNKNOWN) was stored: the
	// pass's answer is the verdict it read, no news, and v3 (a later
	// read's) stands.
	got, appended, err = testDB.AppendVerdictOver(ctx, tn.ID, fail, &v2, 0)
	require.NoError(t, err)
	require.False(t, appended)
	require.Equal(t, v2, got)
	// Read v3, found FAIL: stored as v4.
	v3, err := testDB.LatestVerdict(ctx, tn.ID, "act_1")
	require.NoError(t, err)
	got, appended, err = testDB.AppendVerdictOver(ctx, tn.ID, fail, &v3, 0)
	require.NoError(t, err)
	require.True(t, appended)
	require.Equal(t, 4, got.Version)
	// Read nothing, yet the action has verdicts: the first round's
	// version 1 is taken, and the latest (v4, FAIL) says the same.
	got, appended, err = testDB.AppendVerdictOver(ctx, tn.ID, fail, nil, 0)
	require.NoError(t, err)
	require.False(t, appended)
	require.Equal(t, 4, got.Version)

	hist, err := testDB.VerdictHistory(ctx, tn.ID, "act_1")
	require.NoError(t, err)
	require.Len(t, hist, 4)

	_, _, err = testDB.AppendVerdictOver(ctx, tn.ID, mkVerdict("act_missing", commitlayer.StatusPass, t0), nil, 0)
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}
