package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// The tests follow the project's test-environment rules (internal/testenv):
// the database is one of this process's own (testenv.OwnPostgres: the tests
// count the outbox's rows, which another test process's reconciler would
// take from a shared database), dropped by testenv.Main; without PostgreSQL the tests
// skip, or fail with COMMITLAYER_INTEGRATION=1. They share one migrated store
// on it (each test makes its own tenants, so they do not see each other's
// rows). internal/teststore cannot serve here: it imports this package.
func TestMain(m *testing.M) { testenv.Main(m) }

var (
	storeOnce sync.Once
	storeURL  string
	storeDB   *DB
	storeErr  error
)

// testStore returns the shared migrated store, opening it on first use.
func testStore(t testing.TB) *DB {
	t.Helper()
	u := testenv.OwnPostgres(t)
	storeOnce.Do(func() {
		ctx := context.Background()
		storeURL = u
		storeDB, storeErr = Open(ctx, u)
		if storeErr == nil {
			storeErr = storeDB.Migrate(ctx)
		}
	})
	if storeErr != nil {
		t.Fatalf("test store: %v", storeErr)
	}
	return storeDB
}

// testDatabaseURL returns the URL of the shared store's database.
func testDatabaseURL(t testing.TB) string {
	t.Helper()
	testStore(t)
	return storeURL
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
	tn, _, err := testStore(t).CreateTenant(context.Background(), t.Name())
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

// recordPull stores one page of a connector (RecordPulls of one page).
func recordPull(ctx context.Context, db *DB, tenantID, connectorID string, facts []commitlayer.Fact, cursor string, at time.Time) (commitlayer.InsertResult, error) {
	return db.RecordPulls(ctx, tenantID, "", []PulledPage{{ConnectorID: connectorID, Facts: facts, Cursor: cursor}}, at)
}

// notices reads the tenant's notices not delivered yet, in order.
func notices(t testing.TB, db *DB, tenantID string) []Notice {
	t.Helper()
	rows, err := db.Pool().Query(context.Background(), `SELECT id, tenant_id, subjects, except_action_id, digest, attempts, created_at
		FROM fact_notifications WHERE tenant_id = $1 ORDER BY id`, tenantID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Notice, error) {
		var n Notice
		var subs []string
		err := row.Scan(&n.ID, &n.TenantID, &subs, &n.ExceptActionID, &n.Digest, &n.Attempts, &n.CreatedAt)
		for _, s := range subs {
			n.Subjects = append(n.Subjects, commitlayer.Subject(s))
		}
		return n, err
	})
	require.NoError(t, err)
	return out
}
