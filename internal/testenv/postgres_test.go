package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// closedPort returns a loopback port with nothing listening on it.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// adminURL returns the server test databases are created on, skipping when it does not answer.
func adminURL(t *testing.T) string {
	t.Helper()
	u := postgresURL()
	if err := reachable(u); err != nil {
		unavailable(t, "no PostgreSQL at %s: %v", redact(u), err)
	}
	return u
}

func databaseExists(t *testing.T, admin, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n))
	return n == 1
}

func dbName(t *testing.T, u string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	require.NoError(t, err)
	return cfg.Database
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
			"postgres://postgres@127.0.0.1:5432/x_1?sslmode=disable", ""},
		{"postgresql scheme", "postgresql://u:pw@db:6543/a", "postgresql://u:pw@db:6543/x_1", ""},
		{"no path", "postgres://localhost", "postgres://localhost/x_1", ""},
		{"key value DSN", "host=127.0.0.1 dbname=postgres", "", "not a postgres:// URL"},
		{"other scheme", "mysql://root@localhost/db", "", "not a postgres:// URL"},
		{"bad escape", "postgres://u:%zz@h/db", "", "parse"},
		{"empty", "", "", "not a postgres:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withDatabase(tc.in, "x_1")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "pw", "messages never carry a password")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRedact(t *testing.T) {
	require.Equal(t, "postgres://u:xxxxx@h/db", redact("postgres://u:secret@h/db"))
	require.Equal(t, "postgres://u@h/db", redact("postgres://u@h/db"))
	require.Equal(t, "(unparsable URL)", redact("postgres://u:%zz@h/db"))
}

func TestStalePID(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"commitlayer_test_123", 123, true},
		{"commitlayer_test_123_4", 123, true},
		{"commitlayer_test", 0, false},                      // make test's shared database
		{"commitlayer_test_", 0, false},                     // no pid
		{"commitlayer_test_0", 0, false},                    // not a pid
		{"commitlayer_test_12a", 0, false},                  // not ours
		{"commitlayer_test_1_2_3", 0, false},                // not ours
		{"xcommitlayer_test_123", 0, false},                 // prefix must start the name
		{"commitlayer_test_99999999999999999999", 0, false}, // overflows int
		{"commitlayer", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, ok := stalePID(tc.name)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.pid, pid)
		})
	}
}

func TestProcessAlive(t *testing.T) {
	require.True(t, processAlive(os.Getpid()))
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	require.False(t, processAlive(cmd.Process.Pid), "a reaped child is gone")
}

func TestPostgresFromEnvironment(t *testing.T) {
	admin := adminURL(t)
	t.Setenv(EnvDatabaseURL, admin)
	require.Equal(t, admin, Postgres(t))
}

func TestPostgresUnreachable(t *testing.T) {
	dead := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", closedPort(t))
	for _, tc := range []struct {
		name        string
		env, server string
	}{
		{"shared database", dead, ""},
		{"server for per-process databases", "", dead},
		{"unparsable shared URL", "postgres://u:%zz@h/db", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvDatabaseURL, tc.env)
			t.Setenv(EnvPostgresURL, tc.server)

			t.Setenv(EnvIntegration, "")
			_, returned, fake := call(t, func(tb testing.TB) string { return Postgres(tb) })
			require.False(t, returned)
			require.Empty(t, fake.failed)
			require.Contains(t, fake.skipped, "testenv:")

			t.Setenv(EnvIntegration, "1")
			_, returned, fake = call(t, func(tb testing.TB) string { return Postgres(tb) })
			require.False(t, returned)
			require.Empty(t, fake.skipped)
			require.Contains(t, fake.failed, "testenv:")
			require.NotContains(t, fake.failed, "%zz", "the raw URL is not echoed")
		})
	}
}

func TestPostgresProcessDatabase(t *testing.T) {
	adminURL(t)
	t.Setenv(EnvDatabaseURL, "")
	require.True(t, mainActive.Load(), "this package's tests run through Main")

	first := Postgres(t)
	require.Equal(t, fmt.Sprintf("commitlayer_test_%d", os.Getpid()), dbName(t, first))
	require.Equal(t, first, Postgres(t), "one database per process")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, first)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS testenv_probe (id int PRIMARY KEY)")
	require.NoError(t, err)
}

func TestProcDBCreateAndDrop(t *testing.T) {
	admin := adminURL(t)
	name := fmt.Sprintf("%s%d_%d", dbPrefix, os.Getpid(), perTestSeq.Add(1))
	db := procDB{name: name}

	code := run(fakeRunner{func() int {
		u, err := db.get(admin)
		require.NoError(t, err)
		again, err := db.get(admin)
		require.NoError(t, err)
		require.Equal(t, u, again)
		require.Equal(t, name, dbName(t, u))
		require.True(t, databaseExists(t, admin, name))
		// An open connection does not stop the drop.
		conn, err := pgx.Connect(context.Background(), u)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close(context.Background()) })
		return 7
	}}, &db)

	require.Equal(t, 7, code)
	require.False(t, databaseExists(t, admin, name), "run drops the database after the tests")
	require.NoError(t, db.drop(), "dropping twice is harmless")
}

func TestProcDBReportsCreateError(t *testing.T) {
	dead := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", closedPort(t))
	var db procDB
	_, err := db.get(dead)
	require.ErrorContains(t, err, "create test database")
	_, again := db.get(dead)
	require.Equal(t, err, again, "the first answer is kept")
	require.NoError(t, db.drop(), "nothing to drop")
}

func TestPerTestDatabaseDroppedWithTest(t *testing.T) {
	admin := adminURL(t)
	var name string
	t.Run("inner", func(t *testing.T) {
		u := perTestDatabase(t, admin)
		name = dbName(t, u)
		require.True(t, strings.HasPrefix(name, fmt.Sprintf("%s%d_", dbPrefix, os.Getpid())))
		require.True(t, databaseExists(t, admin, name))
	})
	require.NotEmpty(t, name)
	require.False(t, databaseExists(t, admin, name), "dropped when the test ended")
}

func TestCreateDatabaseDropsStale(t *testing.T) {
	admin := adminURL(t)
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	deadPID := cmd.Process.Pid
	require.False(t, processAlive(deadPID))

	ctx := context.Background()
	conn, err := connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	stale := fmt.Sprintf("%s%d_1", dbPrefix, deadPID)
	live := fmt.Sprintf("%s%d_%d", dbPrefix, os.Getpid(), perTestSeq.Add(1))
	for _, name := range []string{stale, live} {
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize())
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		require.NoError(t, err)
	}
	t.Cleanup(func() { require.NoError(t, dropDatabase(admin, live)) })

	other := fmt.Sprintf("%s%d_%d", dbPrefix, os.Getpid(), perTestSeq.Add(1))
	_, err = createDatabase(admin, other)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dropDatabase(admin, other)) })

	require.False(t, databaseExists(t, admin, stale), "a dead process's database is dropped")
	require.True(t, databaseExists(t, admin, live), "a live process's database stays")
}
