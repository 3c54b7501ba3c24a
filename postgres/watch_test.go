package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/stretchr/testify/require"
)

func TestCountWatchedAndEndWatch(t *testing.T) {
	ctx := context.Background()
	tn, other := newTenant(t), newTenant(t)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for i, id := range []string{"a1", "a2", "a3"} {
		_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction(id, "order:o1", t0), t0, at(10*(i+1)), "", nil)
		require.NoError(t, err)
	}
	_, _, err := testDB.CreateAction(ctx, other.ID, mkAction("a1", "order:o1", t0), t0, at(100), "", nil)
	require.NoError(t, err)

	for _, tc := range []struct {
		now  time.Time
		want int
	}{{at(0), 3}, {at(10), 2}, {at(25), 1}, {at(30), 0}} {
		n, err := testDB.CountWatchedActions(ctx, tn.ID, tc.now)
		require.NoError(t, err)
		require.Equal(t, tc.want, n, "at %v", tc.now)
	}

	// Ending a watch early shortens it; it never extends one.
	require.NoError(t, testDB.EndWatch(ctx, tn.ID, "a3", at(5)))
	require.NoError(t, testDB.EndWatch(ctx, tn.ID, "a1", at(50)))
	a1, err := testDB.GetAction(ctx, tn.ID, "a1")
	require.NoError(t, err)
	require.Equal(t, at(10), a1.WatchUntil)
	a3, err := testDB.GetAction(ctx, tn.ID, "a3")
	require.NoError(t, err)
	require.Equal(t, at(5), a3.WatchUntil)
	watched, err := testDB.WatchedActions(ctx, tn.ID, []commitlayer.Subject{"order:o1"}, at(6))
	require.NoError(t, err)
	require.Len(t, watched, 2)
	n, err := testDB.CountWatchedActions(ctx, tn.ID, at(6))
	require.NoError(t, err)
	require.Equal(t, 2, n)

	// Other tenants: not counted, not touched, not found.
	n, err = testDB.CountWatchedActions(ctx, other.ID, at(0))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.ErrorIs(t, testDB.EndWatch(ctx, other.ID, "a2", at(0)), ErrNotFound)
	require.ErrorIs(t, testDB.EndWatch(ctx, tn.ID, "missing", at(0)), ErrNotFound)
	require.ErrorIs(t, testDB.EndWatch(ctx, tn.ID, "a2", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), ErrInvalid)
	_, err = testDB.CountWatchedActions(ctx, tn.ID, time.Unix(10_000_000_000_000, 0))
	require.ErrorIs(t, err, ErrInvalid)
	a2, err := testDB.GetAction(ctx, tn.ID, "a2")
	require.NoError(t, err)
	require.Equal(t, at(20), a2.WatchUntil)
}
