// Package testenv gives integration tests the services they share: a PostgreSQL database of their own
// and the address of a Temporal server.
//
// A test that needs a service asks for it and is skipped, with the reason, when the service does not
// answer, so `go test ./...` works on a machine with nothing running. With COMMITLAYER_INTEGRATION=1
// (what `make test` and CI set) a missing service fails the test instead: there, a skipped integration
// test would be a silent hole.
//
// A package that calls Postgres should run its tests through Main:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// It imports only the standard library and pgx, so importing it costs little.
package testenv

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// Environment variables read by this package.
const (
	// EnvIntegration set to 1 (or true) turns "skip when a service is missing" into a failure.
	EnvIntegration = "COMMITLAYER_INTEGRATION"
	// EnvDatabaseURL, when set, is the database every test in the run uses (make test creates it).
	EnvDatabaseURL = "COMMITLAYER_TEST_DATABASE_URL"
	// EnvPostgresURL is the server (and a database to connect to) on which per-process test databases
	// are created when EnvDatabaseURL is not set. Default DefaultPostgresURL.
	EnvPostgresURL = "COMMITLAYER_TEST_POSTGRES_URL"
	// EnvTemporalAddress is the Temporal frontend, host:port. Default DefaultTemporalAddress.
	EnvTemporalAddress = "TEMPORAL_ADDRESS"
	// EnvTemporalNamespace is the namespace tests use. Default DefaultNamespace.
	EnvTemporalNamespace = "TEMPORAL_NAMESPACE"
)

// Defaults for the local services that scripts/dev-services.sh starts.
const (
	DefaultPostgresURL     = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultNamespace       = "default"
)

// mainActive is set while Main runs the tests, so Postgres knows a hook will drop its database.
var mainActive atomic.Bool

// Main runs the package's tests, then drops the database that Postgres created for this process, and
// exits with the tests' status. Call it from TestMain.
func Main(m *testing.M) {
	mainActive.Store(true)
	os.Exit(run(m, &proc))
}

// runner is what Main needs of *testing.M.
type runner interface{ Run() int }

func run(m runner, db *procDB) int {
	code := m.Run()
	if err := db.drop(); err != nil {
		// The tests' result stands; a leftover database is dropped by a later run (dropStale).
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
	}
	return code
}

// Integration reports whether missing services fail tests instead of skipping them.
func Integration() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvIntegration))) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// Namespace is the Temporal namespace tests use: TEMPORAL_NAMESPACE, else "default".
func Namespace() string {
	if ns := strings.TrimSpace(os.Getenv(EnvTemporalNamespace)); ns != "" {
		return ns
	}
	return DefaultNamespace
}

// unavailable skips t (or fails it in integration mode) because a service it needs is missing.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if Integration() {
		t.Fatalf("%s (%s=1, so this fails instead of skipping)", reason, EnvIntegration)
	}
	t.Skipf("%s (set %s=1 to fail instead)", reason, EnvIntegration)
}
