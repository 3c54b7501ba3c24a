// Package benchstoretest gives a test process one migrated benchmark store
// on the shared test store (internal/teststore): the product's migrations,
// then the benchmark's.
package benchstoretest

import (
	"context"
	"sync"
	"testing"

	"github.com/commitlayer/commitlayer/internal/teststore"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
)

var (
	once  sync.Once
	store *benchstore.Store
	err   error
)

// Store opens and migrates the benchmark store once per test process. The
// package's TestMain should be testenv.Main.
func Store(t testing.TB) *benchstore.Store {
	t.Helper()
	db := teststore.DB(t)
	once.Do(func() {
		store = benchstore.New(db)
		err = store.Migrate(context.Background())
	})
	if err != nil {
		t.Fatalf("benchmark test store: %v", err)
	}
	return store
}

// CountAgentSteps counts a scenario's recorded steps of a kind.
func CountAgentSteps(t testing.TB, s *benchstore.Store, runID, scenarioID, kind string) int {
	t.Helper()
	var n int
	err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM benchmark.agent_steps
		WHERE run_id = $1 AND scenario_id = $2 AND kind = $3`, runID, scenarioID, kind).Scan(&n)
	if err != nil {
		t.Fatalf("count agent steps: %v", err)
	}
	return n
}
