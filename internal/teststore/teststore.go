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

// store is a store opened and migrated once per test process.
type store struct {
	once sync.Once
	db   *postgres.DB
	err  error
}

func (s *store) open(t testing.TB, url string) *postgres.DB {
	t.Helper()
	s.once.Do(func() {
		ctx := context.Background()
		s.db, s.err = postgres.Open(ctx, url)
		if s.err == nil {
			s.err = s.db.Migrate(ctx)
		}
	})
	if s.err != nil {
		t.Fatalf("test store: %v", s.err)
	}
	return s.db
}

var shared, own store

// DB opens and migrates the store once per test process. The package's
// TestMain should be testenv.Main, which drops a per-process database at
// the end.
func DB(t testing.TB) *postgres.DB {
	t.Helper()
	return shared.open(t, testenv.Postgres(t))
}

// Own opens and migrates, once per test process, a store on a database no
// other test process uses (testenv.OwnPostgres): for tests that count rows
// another process's reconciler may take.
func Own(t testing.TB) *postgres.DB {
	t.Helper()
	return own.open(t, testenv.OwnPostgres(t))
}
