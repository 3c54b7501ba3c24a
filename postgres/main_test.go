package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// testURL is the database this test process created for itself; testDB is
// a migrated store on it, shared by the tests (each test makes its own
// tenants, so they do not see each other's rows).
var (
	testURL string
	testDB  *DB
)

const defaultServerURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	ctx := context.Background()
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		server = defaultServerURL
	}
	u, err := url.Parse(server)
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests: DATABASE_URL:", err)
		return 1
	}
	name := "commitlayer_test_" + randomToken(6)
	u.Path = "/" + name
	testURL = u.String()
	if err := CreateDatabaseIfMissing(ctx, testURL); err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests:", err)
		return 1
	}
	defer dropDatabase(ctx, testURL)
	testDB, err = Open(ctx, testURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests:", err)
		return 1
	}
	defer testDB.Close()
	if err := testDB.Migrate(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests:", err)
		return 1
	}
	return m.Run()
}

// dropDatabase drops the database named in databaseURL from the server's
// "postgres" database, closing its other sessions.
func dropDatabase(ctx context.Context, databaseURL string) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drop test database:", err)
		return
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drop test database:", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintln(os.Stderr, "drop test database:", err)
	}
}

// newTenant creates a tenant for one test.
func newTenant(t testing.TB) commitlayer.Tenant {
	t.Helper()
	tn, _, err := testDB.CreateTenant(context.Background(), t.Name())
	require.NoError(t, err)
	return tn
}

func dbName(t testing.TB, databaseURL string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(databaseURL)
	require.NoError(t, err)
	return cfg.Database
}

func replaceDBName(t testing.TB, databaseURL, name string) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// t0 is the base time of the tests' facts and actions.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mkFact(source, typ, subject, externalID string, at time.Time, attrs commitlayer.Attrs, links ...commitlayer.Subject) commitlayer.Fact {
	return commitlayer.Fact{
		Source: source, Type: typ, Subject: commitlayer.Subject(subject), ExternalID: externalID,
		OccurredAt: at, Attrs: attrs, Links: links,
	}
}

func mkAction(id, subject string, at time.Time) commitlayer.Action {
	return commitlayer.Action{
		ID: id, Contract: "refund_customer", ContractVersion: 1, Agent: "agent-1",
		Subject: commitlayer.Subject(subject), Params: commitlayer.Attrs{"amount": int64(2500), "currency": "usd"},
		RequestedAt: at, Claim: commitlayer.Claim{Status: commitlayer.ClaimSuccess, Message: "refunded"},
	}
}

func mkVerdict(actionID string, status commitlayer.Status, at time.Time) commitlayer.Verdict {
	return commitlayer.Verdict{
		ActionID: actionID, Contract: "refund_customer", ContractVersion: 1, Status: status, Provisional: true,
		Lenses:   commitlayer.Lenses{Outcome: status, Policy: commitlayer.StatusPass},
		Findings: []commitlayer.Finding{}, UnavailableSources: []string{},
		EvaluatedAt: at, SettlesAt: at.Add(10 * time.Minute),
	}
}

// externalIDs lists the external ids of facts, in order.
func externalIDs(facts []commitlayer.Fact) []string {
	out := make([]string, len(facts))
	for i, f := range facts {
		out[i] = f.ExternalID
	}
	return out
}
