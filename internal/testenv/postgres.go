package testenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// dbPrefix starts the name of every database this package creates.
const dbPrefix = "commitlayer_test_"

// connectTimeout bounds each connection attempt to PostgreSQL.
const connectTimeout = 5 * time.Second

// Postgres returns the URL of a PostgreSQL database for t's tests:
//   - COMMITLAYER_TEST_DATABASE_URL when set (make test gives one database to the whole run);
//   - else a database commitlayer_test_<pid> created once per test process on the server at
//     COMMITLAYER_TEST_POSTGRES_URL (default the local server) and dropped by Main when the tests end;
//   - when the package does not run through Main, a database of t's own, dropped when t ends.
//
// The database may hold other tests' data: tests that share it use their own tenants or tables.
// When no PostgreSQL answers, t is skipped with the reason (failed with COMMITLAYER_INTEGRATION=1).
func Postgres(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		if err := reachable(u); err != nil {
			unavailable(t, "testenv: %s: %v", EnvDatabaseURL, err)
		}
		return u
	}
	return OwnPostgres(t)
}

// OwnPostgres returns the URL of a database no other test process uses:
// commitlayer_test_<pid>, made once per process on the server of the run's
// database (or COMMITLAYER_TEST_POSTGRES_URL's) and dropped by Main; a
// database of t's own when the package does not run through Main. It is
// for tests that count rows every process's reconciler may take (the
// outbox of fact notices), which a database shared with other test
// processes cannot promise.
func OwnPostgres(t testing.TB) string {
	t.Helper()
	admin := cmp.Or(os.Getenv(EnvDatabaseURL), postgresURL())
	if err := reachable(admin); err != nil {
		unavailable(t, "testenv: no PostgreSQL at %s: %v", redact(admin), err)
	}
	if !mainActive.Load() {
		return perTestDatabase(t, admin)
	}
	u, err := proc.get(admin)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return u
}

// postgresURL is the server on which test databases are created.
func postgresURL() string {
	if u := os.Getenv(EnvPostgresURL); u != "" {
		return u
	}
	return DefaultPostgresURL
}

var (
	reachMu    sync.Mutex
	reachCache = map[string]error{}
)

// reachable connects to the database at u once per process and remembers the answer.
func reachable(u string) error {
	reachMu.Lock()
	defer reachMu.Unlock()
	if err, ok := reachCache[u]; ok {
		return err
	}
	err := ping(u)
	reachCache[u] = err
	return err
}

func ping(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

func connect(ctx context.Context, u string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > connectTimeout {
		cfg.ConnectTimeout = connectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// withDatabase returns u (a postgres:// URL) pointing at database name instead.
func withDatabase(u, name string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", redact(u), err)
	}
	if parsed.Scheme != "postgres" && parsed.Scheme != "postgresql" {
		return "", fmt.Errorf("%s is not a postgres:// URL", redact(u))
	}
	parsed.Path = "/" + name
	parsed.RawPath = ""
	return parsed.String(), nil
}

// redact hides a password in a URL meant for a message.
func redact(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return parsed.Redacted()
}

// procDB is a database created at the first call of get and dropped by drop.
type procDB struct {
	mu    sync.Mutex
	name  string // default commitlayer_test_<pid>
	done  bool
	admin string // set once the database exists
	url   string
	err   error
}

// proc is the per-process database Postgres hands out and Main drops.
var proc procDB

func (p *procDB) get(admin string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.url, p.err
	}
	p.done = true
	if p.name == "" {
		p.name = dbPrefix + strconv.Itoa(os.Getpid())
	}
	p.url, p.err = createDatabase(admin, p.name)
	if p.err == nil {
		p.admin = admin
	}
	return p.url, p.err
}

// drop drops the database, if it was created, and forgets it.
func (p *procDB) drop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	admin := p.admin
	p.done, p.admin, p.url, p.err = false, "", "", nil
	if admin == "" {
		return nil
	}
	return dropDatabase(admin, p.name)
}

var perTestSeq atomic.Int64

// perTestDatabase creates a database for t alone and drops it when t ends.
func perTestDatabase(t testing.TB, admin string) string {
	t.Helper()
	name := fmt.Sprintf("%s%d_%d", dbPrefix, os.Getpid(), perTestSeq.Add(1))
	u, err := createDatabase(admin, name)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(admin, name); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	return u
}

// createDatabase (re)creates database name on the server at admin and returns its URL. A database of
// that name left by an earlier process with the same pid is dropped first; so are databases of test
// processes that no longer run.
func createDatabase(admin, name string) (string, error) {
	u, err := withDatabase(admin, name)
	if err != nil {
		return "", fmt.Errorf("create test database %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("create test database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	dropStale(ctx, conn)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("create test database %s: drop leftover: %w", name, err)
	}
	// CREATE DATABASE copies template1 and fails while another session uses it; that passes quickly.
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+ident)
		if err == nil || !isObjectInUse(err) || attempt == 20 {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("create test database %s: %w", name, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	if err != nil {
		return "", fmt.Errorf("create test database %s: %w", name, err)
	}
	return u, nil
}

// dropDatabase drops database name, closing any connection tests left open to it.
func dropDatabase(admin, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("drop test database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop test database %s: %w", name, err)
	}
	return nil
}

func isObjectInUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}

// staleName matches the databases this package creates: commitlayer_test_<pid>[_<n>].
var staleName = regexp.MustCompile(`^` + dbPrefix + `([0-9]+)(?:_[0-9]+)?$`)

// stalePID returns the pid in a test database's name, if the name is one this package makes.
func stalePID(name string) (int, bool) {
	m := staleName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// processAlive reports whether a process with this pid runs on this machine.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// dropStale drops, best effort, the databases of test processes that ended without Main's cleanup
// (a timeout panic, an interrupt). It never forces: a database someone is connected to stays.
func dropStale(ctx context.Context, conn *pgx.Conn) {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'commitlayer\\_test\\_%'")
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, name := range names {
		pid, ok := stalePID(name)
		if !ok || pid == self || processAlive(pid) {
			continue
		}
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize())
	}
}
