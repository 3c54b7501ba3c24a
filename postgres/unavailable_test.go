package postgres

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestKilledConnectionsAreRetriedOrUnavailable: connections the server
// killed (a restart, a failover: 57P01) fail their next use; the key
// lookup tries once more and succeeds on a live one, and an error from a
// dead connection elsewhere is commitlayer.ErrUnavailable, which the API
// answers with 503, not 500.
func TestKilledConnectionsAreRetriedOrUnavailable(t *testing.T) {
	shared := testStore(t)
	ctx := context.Background()
	tn, key, err := shared.CreateTenant(ctx, "killed-connections")
	require.NoError(t, err)
	// A pool of this test's own, named, so only its connections are killed
	// (other packages' tests share the database).
	name := "killtest_" + commitlayer.NewID("")
	u, err := url.Parse(testDatabaseURL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", name)
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	db, err := Open(ctx, u.String())
	require.NoError(t, err)
	defer db.Close()
	_, err = db.TenantByAPIKey(ctx, key) // its one connection is now idle
	require.NoError(t, err)
	// Terminate it, as a restart or a failover would.
	var killed int
	require.NoError(t, shared.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1`, name).Scan(&killed))
	require.Equal(t, 1, killed)
	got, err := db.TenantByAPIKey(ctx, key)
	require.NoError(t, err, "the lookup is retried on a live connection")
	require.Equal(t, tn.ID, got.ID)

	require.ErrorIs(t, classify(context.DeadlineExceeded), commitlayer.ErrUnavailable)
	require.NotErrorIs(t, classify(commitlayer.ErrNotFound), commitlayer.ErrUnavailable)
}

// TestOpenPoolParameters: the URL's pgx pool parameters size the pool,
// and the admin connection that creates the database leaves them out.
func TestOpenPoolParameters(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(testDatabaseURL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("pool_max_conns", "3")
	u.RawQuery = q.Encode()
	require.NoError(t, CreateDatabaseIfMissing(ctx, u.String()), "the pool's parameters are not the server's")
	small, err := Open(ctx, u.String())
	require.NoError(t, err)
	defer small.Close()
	require.EqualValues(t, 3, small.Pool().Config().MaxConns)
}
