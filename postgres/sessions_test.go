package postgres

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestHitCountsABurstExactly: concurrent hits of one key get distinct
// counts 1..n (one statement each, no read-then-write), a window ends
// after its length, and Unhit takes one back.
func TestHitCountsABurstExactly(t *testing.T) {
	db, ctx := testStore(t), t.Context()
	key := "test:burst:" + randomToken(8)
	now := time.Now().UTC().Truncate(time.Microsecond)
	const n = 40
	counts := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, until, err := db.Hit(ctx, key, time.Minute, now)
			require.NoError(t, err)
			require.True(t, until.Equal(now.Add(time.Minute)), "%s", until)
			counts[i] = c
		})
	}
	wg.Wait()
	sort.Ints(counts)
	for i, c := range counts {
		require.Equal(t, i+1, c)
	}
	c, until, err := db.Hit(ctx, key, time.Minute, now.Add(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, n+1, c, "same window")
	require.NoError(t, db.Unhit(ctx, key, until))
	c, _, err = db.Hit(ctx, key, time.Minute, now.Add(59*time.Second))
	require.NoError(t, err)
	require.Equal(t, n+1, c, "one taken back")
	c, until, err = db.Hit(ctx, key, time.Minute, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, c, "a new window")
	require.True(t, until.Equal(now.Add(2*time.Minute)))
}

func TestTenantByAPIKeyLimited(t *testing.T) {
	db, ctx := testStore(t), t.Context()
	tn, key, err := db.CreateTenant(ctx, "limited")
	require.NoError(t, err)
	limit := "test:bearer:" + randomToken(8)
	now := time.Now().UTC()
	got, blocked, err := db.TenantByAPIKeyLimited(ctx, key, limit, 2, now)
	require.NoError(t, err)
	require.Equal(t, tn.ID, got.ID)
	require.True(t, blocked.IsZero())
	_, _, err = db.TenantByAPIKeyLimited(ctx, "cl_wrong", limit, 2, now)
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
	for range 2 {
		_, _, err := db.Hit(ctx, limit, time.Minute, now)
		require.NoError(t, err)
	}
	got, blocked, err = db.TenantByAPIKeyLimited(ctx, key, limit, 2, now)
	require.NoError(t, err, "the key is right")
	require.Equal(t, tn.ID, got.ID)
	require.False(t, blocked.IsZero(), "and its address blocked")
	_, blocked, err = db.TenantByAPIKeyLimited(ctx, key, limit, 2, now.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, blocked.IsZero(), "the window ended")
}

// TestSessions: a session is found by its token only, extends on use,
// ends idle, at its maximum age and on delete; past the per-tenant cap a
// tenant's own oldest sessions end, never another tenant's.
func TestSessions(t *testing.T) {
	db, ctx := testStore(t), t.Context()
	a, b := newTenant(t), newTenant(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	create := func(tenant, tok string, at time.Time) error {
		return db.CreateSession(ctx, tenant, tok, at, at.Add(time.Hour), now.Add(3*time.Hour), 3)
	}
	session := func(tok string, at time.Time) (commitlayer.Tenant, error) {
		return db.Session(ctx, tok, at, at.Add(time.Hour))
	}
	tokA, tokB := randomToken(32), randomToken(32)
	require.NoError(t, create(a.ID, tokA, now))
	require.NoError(t, create(b.ID, tokB, now))
	got, err := session(tokA, now.Add(50*time.Minute))
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	require.Equal(t, a.Name, got.Name)
	_, err = session(tokA+"x", now)
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
	var stored int
	require.NoError(t, db.pool.QueryRow(ctx, `SELECT count(*) FROM console_sessions WHERE id_hash = convert_to($1, 'UTF8')`, tokA).Scan(&stored))
	require.Zero(t, stored, "the token itself is not stored")

	// Used at 50m: alive until 1h50m; then the 3h maximum.
	_, err = session(tokA, now.Add(100*time.Minute))
	require.NoError(t, err)
	_, err = session(tokA, now.Add(150*time.Minute))
	require.NoError(t, err)
	_, err = session(tokA, now.Add(181*time.Minute))
	require.ErrorIs(t, err, commitlayer.ErrNotFound, "past its maximum age")
	_, err = session(tokB, now.Add(61*time.Minute))
	require.ErrorIs(t, err, commitlayer.ErrNotFound, "idle past an hour")

	// The cap: tenant a logs in 5 times; its 2 oldest go, b's stays.
	tokB = randomToken(32)
	require.NoError(t, create(b.ID, tokB, now))
	var toks []string
	for i := range 5 {
		tok := randomToken(32)
		toks = append(toks, tok)
		require.NoError(t, create(a.ID, tok, now.Add(time.Duration(i)*time.Second)))
	}
	for i, tok := range toks {
		_, err := session(tok, now.Add(time.Minute))
		if i < 2 {
			require.ErrorIs(t, err, commitlayer.ErrNotFound, "session %d", i)
		} else {
			require.NoError(t, err, "session %d", i)
		}
	}
	_, err = session(tokB, now.Add(time.Minute))
	require.NoError(t, err, "another tenant's session is never evicted")

	require.NoError(t, db.DeleteSession(ctx, toks[4]))
	_, err = session(toks[4], now.Add(time.Minute))
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}
