package postgres

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMigrateIdempotent(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	require.NoError(t, testDB.Migrate(ctx))
	require.NoError(t, testDB.Migrate(ctx))
	migs, _, err := ProductMigrations.load()
	require.NoError(t, err)
	require.NotEmpty(t, migs)
	var n int
	require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n))
	require.Equal(t, len(migs), n)
}

// TestMigrateConcurrent migrates a fresh database from several pools at
// once, as several processes starting together would.
func TestMigrateConcurrent(t *testing.T) {
	testURL := testDatabaseURL(t)
	ctx := context.Background()
	url := replaceDBName(t, testURL, dbName(t, testURL)+"_mig")
	require.NoError(t, CreateDatabaseIfMissing(ctx, url))
	require.NoError(t, CreateDatabaseIfMissing(ctx, url)) // exists: no error
	t.Cleanup(func() { dropDatabase(context.Background(), url) })

	const n = 4
	dbs := make([]*DB, n)
	for i := range dbs {
		db, err := Open(ctx, url)
		require.NoError(t, err)
		t.Cleanup(db.Close)
		dbs[i] = db
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() { errs[i] = dbs[i].Migrate(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	migs, _, err := ProductMigrations.load()
	require.NoError(t, err)
	var count int
	require.NoError(t, dbs[0].Pool().QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&count))
	require.Equal(t, len(migs), count)
	// The schema works.
	_, _, err = dbs[1].CreateTenant(ctx, "after concurrent migrate")
	require.NoError(t, err)
}

func TestCreateDatabaseIfMissingBadURL(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"::not a url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=1"} {
		require.Error(t, CreateDatabaseIfMissing(ctx, u), u)
	}
	_, err := Open(ctx, "::not a url")
	require.Error(t, err)
}
