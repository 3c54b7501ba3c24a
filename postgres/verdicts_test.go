package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/stretchr/testify/require"
)

func TestVerdictHistory(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_1", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)

	_, err = testDB.LatestVerdict(ctx, tn.ID, "act_1")
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
	hist, err := testDB.VerdictHistory(ctx, tn.ID, "act_1")
	require.NoError(t, err)
	require.Empty(t, hist)

	prov := mkVerdict("act_1", commitlayer.StatusUnknown, t0)
	prov.Findings = []commitlayer.Finding{{Code: commitlayer.CodeSourceUnavailable, Check: "refund",
		Lens: commitlayer.LensOutcome, Message: "payments unreachable", Facts: []string{}}}
	prov.UnavailableSources = []string{"payments"}
	v1, appended, err := testDB.AppendVerdict(ctx, tn.ID, prov)
	require.NoError(t, err)
	require.True(t, appended)
	require.Equal(t, 1, v1.Version)

	// An activity retry with the same answer (later time) stores nothing.
	retry := prov
	retry.EvaluatedAt = t0.Add(time.Second)
	got, appended, err := testDB.AppendVerdict(ctx, tn.ID, retry)
	require.NoError(t, err)
	require.False(t, appended)
	require.Equal(t, v1, got)

	// A changed answer is version 2, then the final one version 3.
	pass := mkVerdict("act_1", commitlayer.StatusPass, t0.Add(time.Minute))
	v2, appended, err := testDB.AppendVerdict(ctx, tn.ID, pass)
	require.NoError(t, err)
	require.True(t, appended)
	require.Equal(t, 2, v2.Version)
	final := pass
	final.Provisional = false
	final.EvaluatedAt = t0.Add(10 * time.Minute)
	v3, appended, err := testDB.AppendVerdict(ctx, tn.ID, final)
	require.NoError(t, err)
	require.True(t, appended)
	require.Equal(t, 3, v3.Version)

	// Going back to an earlier answer is a new version, never an overwrite.
	back, appended, err := testDB.AppendVerdict(ctx, tn.ID, prov)
	require.NoError(t, err)
	require.True(t, appended)
	require.Equal(t, 4, back.Version)

	hist, err = testDB.VerdictHistory(ctx, tn.ID, "act_1")
	require.NoError(t, err)
	require.Equal(t, []commitlayer.Verdict{v1, v2, v3, back}, hist)
	require.Equal(t, prov.Findings, hist[0].Findings)
	require.Equal(t, []string{"payments"}, hist[0].UnavailableSources)
	latest, err := testDB.LatestVerdict(ctx, tn.ID, "act_1")
	require.NoError(t, err)
	require.Equal(t, back, latest)

	// Status and provisional are columns too.
	var status string
	var provisional bool
	require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT status, provisional FROM verdicts
		WHERE tenant_id = $1 AND action_id = 'act_1' AND version = 3`, tn.ID).Scan(&status, &provisional))
	require.Equal(t, "PASS", status)
	require.False(t, provisional)
}

func TestAppendVerdictBadInput(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_1", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)
	cases := []struct {
		name string
		v    commitlayer.Verdict
		want error
	}{
		{"no action id", mkVerdict("", commitlayer.StatusPass, t0), commitlayer.ErrInvalid},
		{"bad status", mkVerdict("act_1", "MAYBE", t0), commitlayer.ErrInvalid},
		{"empty status", mkVerdict("act_1", "", t0), commitlayer.ErrInvalid},
		{"unknown action", mkVerdict("act_2", commitlayer.StatusPass, t0), commitlayer.ErrNotFound},
		{"NUL in message", func() commitlayer.Verdict {
			v := mkVerdict("act_1", commitlayer.StatusFail, t0)
			v.Findings = []commitlayer.Finding{{Code: commitlayer.CodeMissingEffect, Message: "a\x00"}}
			return v
		}(), commitlayer.ErrInvalid},
	}
	for _, tc := range cases {
		_, appended, err := testDB.AppendVerdict(ctx, tn.ID, tc.v)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.False(t, appended)
	}
	require.Zero(t, rowCounts(t, tn.ID)["verdicts"])
}

// TestAppendVerdictConcurrent races retries of one activity and distinct
// answers: versions stay dense and each answer is stored once in a row.
func TestAppendVerdictConcurrent(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_1", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	appendedN := make([]bool, 8)
	for i := range 8 {
		wg.Go(func() {
			_, appendedN[i], errs[i] = testDB.AppendVerdict(ctx, tn.ID, mkVerdict("act_1", commitlayer.StatusFail, t0))
		})
	}
	wg.Wait()
	n := 0
	for i := range errs {
		require.NoError(t, errs[i])
		if appendedN[i] {
			n++
		}
	}
	require.Equal(t, 1, n)
	hist, err := testDB.VerdictHistory(ctx, tn.ID, "act_1")
	require.NoError(t, err)
	require.Len(t, hist, 1)
}

// TestAppendVerdictRacingChanges races appends of changing answers: an
// append that loses a version to another compares with what that one
// stored, so versions stay dense and no verdict repeats the one before.
func TestAppendVerdictRacingChanges(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_1", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)
	statuses := []commitlayer.Status{commitlayer.StatusPass, commitlayer.StatusFail, commitlayer.StatusUnknown}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			for j := range 10 {
				if _, _, err := testDB.AppendVerdict(ctx, tn.ID, mkVerdict("act_1", statuses[(i+j)%3], t0)); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	hist, err := testDB.VerdictHistory(ctx, tn.ID, "act_1")
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	for i, v := range hist {
		require.Equal(t, i+1, v.Version)
		if i > 0 {
			require.False(t, hist[i-1].SameAnswer(v), "version %d repeats the one before", v.Version)
		}
	}
}

// TestLatestVerdictHeads: each action's latest verdict's head, read in the
// server, says what its whole verdict says: version, provisional flag,
// contract version (zero when the verdict names none) and the count of
// unavailable sources (zero for none or null).
func TestLatestVerdictHeads(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction(id, "order:o1", t0), t0, t0, "", nil)
		require.NoError(t, err)
	}
	final := mkVerdict("a1", commitlayer.StatusPass, t0)
	final.Provisional, final.ContractVersion = false, 3
	unavailable := mkVerdict("a2", commitlayer.StatusUnknown, t0)
	unavailable.Provisional, unavailable.UnavailableSources = false, []string{"payments", "tickets"}
	noVersion := mkVerdict("a3", commitlayer.StatusFail, t0)
	noVersion.ContractVersion, noVersion.UnavailableSources = 0, nil // omitted, and null, in the body
	for _, v := range []commitlayer.Verdict{
		mkVerdict("a1", commitlayer.StatusUnknown, t0), final, // the latest of two
		unavailable, noVersion,
		mkVerdict("a4", commitlayer.StatusUnknown, t0), // provisional
	} {
		_, appended, err := testDB.AppendVerdict(ctx, tn.ID, v)
		require.NoError(t, err)
		require.True(t, appended)
	}
	ids := []string{"a1", "a2", "a3", "a4", "a5", "nope"}
	got, err := testDB.LatestVerdictHeads(ctx, tn.ID, ids)
	require.NoError(t, err)
	require.Equal(t, map[string]VerdictHead{
		"a1": {Version: 2, ContractVersion: 3},
		"a2": {Version: 1, ContractVersion: 1, Unavailable: 2},
		"a3": {Version: 1, Provisional: true},
		"a4": {Version: 1, Provisional: true, ContractVersion: 1},
	}, got)
	// The same as the whole verdicts say.
	for id, h := range got {
		v, err := testDB.LatestVerdict(ctx, tn.ID, id)
		require.NoError(t, err)
		require.Equal(t, VerdictHead{Version: v.Version, Provisional: v.Provisional,
			ContractVersion: v.ContractVersion, Unavailable: len(v.UnavailableSources)}, h, id)
	}
	got, err = testDB.LatestVerdictHeads(ctx, newTenant(t).ID, ids)
	require.NoError(t, err)
	require.Empty(t, got, "another tenant's")
	got, err = testDB.LatestVerdictHeads(ctx, tn.ID, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestAppendFirstVerdict stores a verdict only as an action's first, and a
// start refused for good deletes it with the marking.
func TestAppendFirstVerdict(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	for _, id := range []string{"act_1", "act_2"} {
		_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction(id, "order:o1", t0), t0, t0, "", nil)
		require.NoError(t, err)
	}
	require.NoError(t, testDB.AppendFirstVerdict(ctx, tn.ID, mkVerdict("act_1", commitlayer.StatusPass, t0), time.Millisecond))
	require.NoError(t, testDB.AppendFirstVerdict(ctx, tn.ID, mkVerdict("act_1", commitlayer.StatusFail, t0), time.Millisecond))
	hist, err := testDB.VerdictHistory(ctx, tn.ID, "act_1")
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, commitlayer.StatusPass, hist[0].Status, "the first stands")
	require.NoError(t, testDB.AppendFirstVerdict(ctx, tn.ID, mkVerdict("act_missing", commitlayer.StatusPass, t0), 0), "no action: nothing stored")
	hist, err = testDB.VerdictHistory(ctx, tn.ID, "act_missing")
	require.NoError(t, err)
	require.Empty(t, hist)

	require.NoError(t, testDB.AppendFirstVerdict(ctx, tn.ID, mkVerdict("act_2", commitlayer.StatusPass, t0), 0))
	marked, err := testDB.StartFailed(ctx, tn.ID, "act_2", "refused")
	require.NoError(t, err)
	require.True(t, marked)
	hist, err = testDB.VerdictHistory(ctx, tn.ID, "act_2")
	require.NoError(t, err)
	require.Empty(t, hist, "a verification that never started answers nothing")
}
