package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/stretchr/testify/require"
)

func TestCreateActionRoundTrip(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	a := mkAction("", "order:o1", t0)
	a.Params["big"] = int64(9007199254740993)
	a.Params["rate"] = 0.25
	a.Trace = json.RawMessage(`[{"tool":"refund","args":{"amount":2500}}]`)
	rec, created, err := testDB.CreateAction(ctx, tn.ID, a, t0.Add(10*time.Minute), t0.Add(72*time.Hour), "", []byte("h1"))
	require.NoError(t, err)
	require.True(t, created)
	require.Regexp(t, `^act_[a-z2-7]{16}$`, rec.ID)
	require.Equal(t, tn.ID, rec.TenantID)
	require.Equal(t, t0.Add(10*time.Minute), rec.SettlesAt)
	require.Equal(t, t0.Add(72*time.Hour), rec.WatchUntil)
	require.False(t, rec.CreatedAt.IsZero())

	got, err := testDB.GetAction(ctx, tn.ID, rec.ID)
	require.NoError(t, err)
	require.Equal(t, rec, got)
	want := a
	want.ID = rec.ID
	require.JSONEq(t, string(a.Trace), string(got.Trace))
	got.Trace, want.Trace = nil, nil
	require.Equal(t, want, got.Action)
	require.Equal(t, int64(9007199254740993), got.Params["big"])

	// No trace and no params round-trip as nil trace and empty params.
	b := mkAction("act_b", "order:o1", t0)
	b.Params = nil
	rec, _, err = testDB.CreateAction(ctx, tn.ID, b, t0, t0, "", nil)
	require.NoError(t, err)
	require.Nil(t, rec.Trace)
	require.Equal(t, commitlayer.Attrs{}, rec.Params)

	_, err = testDB.GetAction(ctx, tn.ID, "act_missing")
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}

func TestCreateActionBadInput(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	cases := []struct {
		name     string
		mut      func(*commitlayer.Action)
		fieldErr bool
	}{
		{"no contract", func(a *commitlayer.Action) { a.Contract = "" }, true},
		{"no agent", func(a *commitlayer.Action) { a.Agent = "" }, true},
		{"no requested_at", func(a *commitlayer.Action) { a.RequestedAt = time.Time{} }, true},
		{"bad subject", func(a *commitlayer.Action) { a.Subject = "o1" }, true},
		{"id with slash", func(a *commitlayer.Action) { a.ID = "a/b" }, true},
		{"id too long", func(a *commitlayer.Action) { a.ID = strings.Repeat("a", 129) }, true},
		{"trace not json", func(a *commitlayer.Action) { a.Trace = json.RawMessage(`{"x":`) }, false},
		{"unencodable param", func(a *commitlayer.Action) { a.Params = commitlayer.Attrs{"x": func() {}} }, false},
		{"NUL in agent", func(a *commitlayer.Action) { a.Agent = "a\x00" }, false},
		{"NUL in params", func(a *commitlayer.Action) { a.Params = commitlayer.Attrs{"x": "\x00"} }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := mkAction("act_bad", "order:o1", t0)
			tc.mut(&a)
			_, created, err := testDB.CreateAction(ctx, tn.ID, a, t0, t0, "key-"+tc.name, []byte("h"))
			require.ErrorIs(t, err, commitlayer.ErrInvalid)
			require.False(t, created)
			var fe *commitlayer.FieldError
			require.Equal(t, tc.fieldErr, errors.As(err, &fe), "%v", err)
		})
	}
	require.Zero(t, rowCounts(t, tn.ID)["actions"])

	_, _, err := testDB.CreateAction(ctx, "t_missing", mkAction("", "order:o1", t0), t0, t0, "", nil)
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}

func TestCreateActionIdempotencyKey(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	a := mkAction("", "order:o1", t0)
	first, created, err := testDB.CreateAction(ctx, tn.ID, a, t0, t0, "idem-1", []byte("hash-a"))
	require.NoError(t, err)
	require.True(t, created)

	// Same key, same request: the same action, not created again.
	again, created, err := testDB.CreateAction(ctx, tn.ID, a, t0, t0, "idem-1", []byte("hash-a"))
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, first, again)

	// Same key, another body: conflict.
	b := a
	b.Params = commitlayer.Attrs{"amount": int64(1)}
	_, created, err = testDB.CreateAction(ctx, tn.ID, b, t0, t0, "idem-1", []byte("hash-b"))
	require.ErrorIs(t, err, commitlayer.ErrConflict)
	require.False(t, created)

	// Another key: another action.
	other, created, err := testDB.CreateAction(ctx, tn.ID, a, t0, t0, "idem-2", []byte("hash-a"))
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, first.ID, other.ID)

	// No key: every call creates.
	n1, c1, err := testDB.CreateAction(ctx, tn.ID, a, t0, t0, "", []byte("hash-a"))
	require.NoError(t, err)
	n2, c2, err := testDB.CreateAction(ctx, tn.ID, a, t0, t0, "", []byte("hash-a"))
	require.NoError(t, err)
	require.True(t, c1 && c2)
	require.NotEqual(t, n1.ID, n2.ID)
	require.Equal(t, 4, rowCounts(t, tn.ID)["actions"])
}

func TestCreateActionClientID(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	a := mkAction("act_client_1", "order:o1", t0)
	_, created, err := testDB.CreateAction(ctx, tn.ID, a, t0, t0, "", []byte("h"))
	require.NoError(t, err)
	require.True(t, created)

	rec, created, err := testDB.CreateAction(ctx, tn.ID, a, t0, t0, "", []byte("h"))
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, "act_client_1", rec.ID)

	// A key that is new but an id that exists with the same body: the
	// existing action.
	rec, created, err = testDB.CreateAction(ctx, tn.ID, a, t0, t0, "fresh-key", []byte("h"))
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, "act_client_1", rec.ID)

	_, _, err = testDB.CreateAction(ctx, tn.ID, a, t0, t0, "", []byte("other"))
	require.ErrorIs(t, err, commitlayer.ErrConflict)
	_, _, err = testDB.CreateAction(ctx, tn.ID, a, t0, t0, "another-key", []byte("other"))
	require.ErrorIs(t, err, commitlayer.ErrConflict)
	require.Equal(t, 1, rowCounts(t, tn.ID)["actions"])
}

// TestCreateActionConcurrentKey races several requests with one key: one
// creates, the others get the same action back.
func TestCreateActionConcurrentKey(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	const n = 8
	recs := make([]commitlayer.ActionRecord, n)
	createds := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			recs[i], createds[i], errs[i] = testDB.CreateAction(ctx, tn.ID, mkAction("", "order:o1", t0), t0, t0, "race", []byte("h"))
		})
	}
	wg.Wait()
	nCreated := 0
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, recs[0].ID, recs[i].ID)
		if createds[i] {
			nCreated++
		}
	}
	require.Equal(t, 1, nCreated)
	require.Equal(t, 1, rowCounts(t, tn.ID)["actions"])
}

func TestPriorAndContractActions(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	mk := func(id, contract, agent, subject string, m int) {
		a := mkAction(id, subject, at(m))
		a.Contract, a.Agent = contract, agent
		a.Trace = json.RawMessage(`{"steps":[{"tool":"payout","said":"sent"}]}`)
		_, _, err := testDB.CreateAction(ctx, tn.ID, a, at(m+10), at(m+100), "", nil)
		require.NoError(t, err)
	}
	mk("a1", "payout", "bot", "payout:p1", 1)
	mk("a2", "payout", "bot", "payout:p2", 2)
	mk("a3", "payout", "other", "payout:p1", 3)
	mk("a4", "refund", "bot", "payout:p1", 4)
	mk("a5", "payout", "bot", "payout:p1", 5)

	ids := func(acts []commitlayer.Action) []string {
		out := []string{}
		for _, a := range acts {
			out = append(out, a.ID)
		}
		return out
	}
	cases := []struct {
		name           string
		agent, subject string
		from, to       time.Time
		exclude        string
		want           []string
	}{
		{"by agent", "bot", "", at(0), at(10), "a5", []string{"a1", "a2"}},
		{"by subject", "", "payout:p1", at(0), at(10), "a5", []string{"a1", "a3"}},
		{"by both", "bot", "payout:p1", at(0), at(10), "", []string{"a1", "a5"}},
		{"window inclusive", "bot", "", at(2), at(5), "", []string{"a2", "a5"}},
		{"open ends", "", "", time.Time{}, time.Time{}, "a1", []string{"a2", "a3", "a5"}},
		{"empty window", "bot", "", at(6), at(9), "", []string{}},
		{"unknown agent", "nobody", "", at(0), at(10), "", []string{}},
	}
	for _, tc := range cases {
		acts, err := testDB.PriorActions(ctx, tn.ID, "payout", tc.agent, commitlayer.Subject(tc.subject), tc.from, tc.to, tc.exclude)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, ids(acts), tc.name)
	}

	acts, err := testDB.ActionsOfContract(ctx, tn.ID, "payout", time.Time{})
	require.NoError(t, err)
	require.Equal(t, []string{"a1", "a2", "a3", "a5"}, ids(acts))
	acts, err = testDB.ActionsOfContract(ctx, tn.ID, "payout", at(3))
	require.NoError(t, err)
	require.Equal(t, []string{"a3", "a5"}, ids(acts))
	acts, err = testDB.ActionsOfContract(ctx, tn.ID, "nope", time.Time{})
	require.NoError(t, err)
	require.Empty(t, acts)

	// Watched: subject in the list and watch_until (m+100) after now.
	watched, err := testDB.WatchedActions(ctx, tn.ID, []commitlayer.Subject{"payout:p1", "payout:zz"}, at(102))
	require.NoError(t, err)
	var wids []string
	for _, w := range watched {
		wids = append(wids, w.ID)
		require.Equal(t, tn.ID, w.TenantID)
		// The whole record but its trace, which no one waking reads.
		stored, err := testDB.GetAction(ctx, tn.ID, w.ID)
		require.NoError(t, err)
		require.Nil(t, w.Trace)
		require.NotEmpty(t, stored.Trace)
		stored.Trace = nil
		require.Equal(t, stored, w)
	}
	require.Equal(t, []string{"a3", "a4", "a5"}, wids) // a1's watch ended at 101
	watched, err = testDB.WatchedActions(ctx, tn.ID, []commitlayer.Subject{"payout:p1"}, at(105))
	require.NoError(t, err)
	require.Empty(t, watched, "watch_until is exclusive")
	watched, err = testDB.WatchedActions(ctx, tn.ID, nil, at(0))
	require.NoError(t, err)
	require.Empty(t, watched)
}
