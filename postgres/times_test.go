package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/stretchr/testify/require"
)

// TestTimesOutOfRange: times pgx would wrap around (beyond Postgres's
// range) or RFC 3339 cannot write are refused by every method that takes
// one, before anything is stored or read.
func TestTimesOutOfRange(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_1", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)
	conn, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "payments", Kind: "http_events"})
	require.NoError(t, err)
	before := rowCounts(t, tn.ID)

	bads := map[string]time.Time{
		"year 10000":     time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		"year 296000":    time.Unix(9_300_000_000_000, 0),
		"µs overflow":    time.Unix(10_000_000_000_000, 0),
		"year 0":         time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC),
		"before 4713 BC": time.Unix(-10_000_000_000_000, 0),
		"9999 in +02:00": time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("x", 2*3600)),
	}
	calls := map[string]func(at time.Time) error{
		"InsertFacts": func(at time.Time) error {
			_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{mkFact("payments", "x", "order:o1", "e", at, nil)})
			return err
		},
		"CreateAction requested_at": func(at time.Time) error {
			_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("", "order:o1", at), t0, t0, "", nil)
			return err
		},
		"CreateAction settles_at": func(at time.Time) error {
			_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("", "order:o1", t0), at, t0, "", nil)
			return err
		},
		"CreateAction watch_until": func(at time.Time) error {
			_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("", "order:o1", t0), t0, at, "", nil)
			return err
		},
		"AppendVerdict": func(at time.Time) error {
			_, _, err := testDB.AppendVerdict(ctx, tn.ID, mkVerdict("act_1", commitlayer.StatusPass, at))
			return err
		},
		"RecordPull": func(at time.Time) error {
			_, err := recordPull(ctx, testDB, tn.ID, conn.ID, nil, "1", at)
			return err
		},
		"RecordPullError": func(at time.Time) error { return testDB.RecordPullError(ctx, tn.ID, conn.ID, "x", at) },
		"FactsOfKinds": func(at time.Time) error {
			_, err := testDB.FactsOfKinds(ctx, tn.ID, []commitlayer.FactType{{Source: "payments", Type: "x"}}, time.Time{}, at)
			return err
		},
		"PriorActions": func(at time.Time) error {
			_, err := testDB.PriorActions(ctx, tn.ID, "refund_customer", "", "", at, time.Time{}, "")
			return err
		},
		"ActionsOfContract": func(at time.Time) error {
			_, err := testDB.ActionsOfContract(ctx, tn.ID, "refund_customer", at)
			return err
		},
		"WatchedActions": func(at time.Time) error {
			_, err := testDB.WatchedActions(ctx, tn.ID, []commitlayer.Subject{"order:o1"}, at)
			return err
		},
	}
	for name, call := range calls {
		for what, at := range bads {
			err := call(at)
			if what == "9999 in +02:00" {
				require.NoError(t, err, "%s %s", name, what)
				continue
			}
			require.ErrorIs(t, err, commitlayer.ErrInvalid, "%s %s", name, what)
		}
	}
	after := rowCounts(t, tn.ID)
	after["verdicts"]--           // the in-range 9999 verdict
	after["facts"]--              // and fact
	after["fact_notifications"]-- // with its notice
	after["source_coverage"]--
	after["actions"] -= 3
	require.Equal(t, before, after)
	// The connector kept its state but for the in-range calls.
	got, err := testDB.GetConnector(ctx, tn.ID, conn.ID)
	require.NoError(t, err)
	require.Equal(t, 9999, got.LastPullAt.Year())
}
