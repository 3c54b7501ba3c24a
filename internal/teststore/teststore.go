// Package teststore gives a test process one migrated store on the run's
// test database (internal/testenv), shared by its tests; each test makes
// its own tenants, so they do not see each other's rows.
package teststore

import (
	"context"
	"sync"
	"testing"

	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/postgres"
)

var (
	once sync.Once
	db   *postgres.DB
	err  error
)

// DB opens and migrates the store once per test process. The package's
// TestMain should be testenv.Main, which drops a per-process database at
// the end.
func DB(t testing.TB) *postgres.DB {
	t.Helper()
	url := testenv.Postgres(t)
	once.Do(func() {
		ctx := context.Background()
		db, err = postgres.Open(ctx, url)
		if err == nil {
			err = db.Migrate(ctx)
		}
	})
	if err != nil {
		t.Fatalf("test store: %v", err)
	}
	return db
}

var (
	ownOnce sync.Once
	ownDB   *postgres.DB
	ownErr  error
)

// Own opens and migrates, once per test process, a store on a database no
// other test process uses (testenv.OwnPostgres): for tests that count rows
// another process's reconciler may take.
func Own(t testing.TB) *postgres.DB {
	t.Helper()
	url := testenv.OwnPostgres(t)
	ownOnce.Do(func() {
		ctx := context.Background()
		ownDB, ownErr = postgres.Open(ctx, url)
		if ownErr == nil {
			ownErr = ownDB.Migrate(ctx)
		}
	})
	if ownErr != nil {
		t.Fatalf("test store: %v", ownErr)
	}
	return ownDB
}
