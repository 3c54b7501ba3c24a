package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/stretchr/testify/require"
)

func TestConnectors(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	c, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "payments", Kind: "http_events", URL: "http://x/payments",
		TenantID: "ignored"})
	require.NoError(t, err)
	require.Regexp(t, `^conn_[a-z2-7]{16}$`, c.ID)
	require.Equal(t, tn.ID, c.TenantID)
	require.Equal(t, "payments", c.Source)
	require.Equal(t, "http_events", c.Kind)
	require.Equal(t, "http://x/payments", c.URL)
	require.Empty(t, c.Cursor)
	require.True(t, c.LastPullAt.IsZero())
	require.False(t, c.CreatedAt.IsZero())

	got, err := testDB.GetConnector(ctx, tn.ID, c.ID)
	require.NoError(t, err)
	require.Equal(t, c, got)

	// One per source; a taken id conflicts too.
	_, err = testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "payments", Kind: "stripe"})
	require.ErrorIs(t, err, commitlayer.ErrConflict)
	_, err = testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{ID: c.ID, Source: "orders", Kind: "http_events"})
	require.ErrorIs(t, err, commitlayer.ErrConflict)
	c2, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{ID: "conn_orders", Source: "orders", Kind: "http_events", Cursor: "5"})
	require.NoError(t, err)
	require.Equal(t, "5", c2.Cursor)

	list, err := testDB.ListConnectors(ctx, tn.ID)
	require.NoError(t, err)
	require.Equal(t, []commitlayer.Connector{c2, c}, list)

	_, err = testDB.GetConnector(ctx, tn.ID, "conn_missing")
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}

func TestCreateConnectorBadInput(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	cases := []struct {
		name   string
		tenant string
		c      commitlayer.Connector
		want   error
	}{
		{"no source", tn.ID, commitlayer.Connector{Kind: "http_events"}, commitlayer.ErrInvalid},
		{"source with space", tn.ID, commitlayer.Connector{Source: "pay ments", Kind: "http_events"}, commitlayer.ErrInvalid},
		{"no kind", tn.ID, commitlayer.Connector{Source: "payments"}, commitlayer.ErrInvalid},
		{"NUL in url", tn.ID, commitlayer.Connector{Source: "payments", Kind: "http_events", URL: "http://\x00"}, commitlayer.ErrInvalid},
		{"unknown tenant", "t_missing", commitlayer.Connector{Source: "payments", Kind: "http_events"}, commitlayer.ErrNotFound},
	}
	for _, tc := range cases {
		_, err := testDB.CreateConnector(ctx, tc.tenant, tc.c)
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	list, err := testDB.ListConnectors(ctx, tn.ID)
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestRecordPull(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	c, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "payments", Kind: "http_events", URL: "http://x"})
	require.NoError(t, err)
	pulledAt := t0.Add(time.Minute)

	// An error first; then a successful pull clears it.
	require.NoError(t, testDB.RecordPullError(ctx, tn.ID, c.ID, "connection refused", t0))
	got, err := testDB.GetConnector(ctx, tn.ID, c.ID)
	require.NoError(t, err)
	require.Equal(t, "connection refused", got.LastError)
	require.Equal(t, t0, got.LastErrorAt)
	require.True(t, got.LastPullAt.IsZero())
	srcs, err := testDB.Sources(ctx, tn.ID)
	require.NoError(t, err)
	require.Equal(t, []commitlayer.SourceCoverage{{Source: "payments", ConnectorID: c.ID, LastError: "connection refused", LastErrorAt: t0}}, srcs)

	res, err := recordPull(ctx, testDB, tn.ID, c.ID, []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o1", "payments-1", t0, nil),
		mkFact("payments", "refund_created", "order:o2", "payments-2", t0, nil, "ticket:t1"),
	}, "2", pulledAt)
	require.NoError(t, err)
	require.Equal(t, commitlayer.InsertResult{Inserted: 2, Subjects: []commitlayer.Subject{"order:o1", "order:o2", "ticket:t1"}}, res)
	ns := notices(t, testDB, tn.ID)
	require.Len(t, ns, 1, "the notice is written with the facts")
	require.Equal(t, res.Subjects, ns[0].Subjects)
	require.Equal(t, &contracts.Digest{Kinds: []contracts.KindSince{{FactType: commitlayer.FactType{Source: "payments", Type: "refund_created"}, Earliest: t0}}, Linked: true}, ns[0].Digest)
	got, err = testDB.GetConnector(ctx, tn.ID, c.ID)
	require.NoError(t, err)
	require.Equal(t, "2", got.Cursor)
	require.Equal(t, pulledAt, got.LastPullAt)
	require.Empty(t, got.LastError)
	require.True(t, got.LastErrorAt.IsZero())

	// A pull that overlaps the last one counts duplicates; an empty pull
	// still moves the cursor and the pull time.
	res, err = recordPull(ctx, testDB, tn.ID, c.ID, []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o2", "payments-2", t0, nil),
		mkFact("payments", "refund_created", "order:o3", "payments-3", t0, nil),
	}, "3", pulledAt.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, 1, res.Duplicates)
	require.NoError(t, testDB.RecordPullError(ctx, tn.ID, c.ID, "timeout", pulledAt.Add(90*time.Second)))
	_, err = recordPull(ctx, testDB, tn.ID, c.ID, nil, "3", pulledAt.Add(2*time.Minute)) // the one-statement path
	require.NoError(t, err)
	got, err = testDB.GetConnector(ctx, tn.ID, c.ID)
	require.NoError(t, err)
	require.Equal(t, pulledAt.Add(2*time.Minute), got.LastPullAt)
	require.Equal(t, "3", got.Cursor)
	require.Empty(t, got.LastError, "an empty pull clears the last error too")
	require.True(t, got.LastErrorAt.IsZero())
	_, err = recordPull(ctx, testDB, tn.ID, "no_such_connector", nil, "3", pulledAt.Add(2*time.Minute))
	require.ErrorIs(t, err, commitlayer.ErrNotFound, "an empty pull of an unknown connector")

	srcs, err = testDB.Sources(ctx, tn.ID)
	require.NoError(t, err)
	require.Len(t, srcs, 1)
	require.True(t, srcs[0].EverReported)
	require.Equal(t, int64(3), srcs[0].FactCount)
	require.Equal(t, c.ID, srcs[0].ConnectorID)
	require.Empty(t, srcs[0].LastError)
	require.False(t, srcs[0].LastSeenAt.Before(pulledAt.Add(2*time.Minute)), "last seen includes the last pull")

	// An error after success keeps the cursor and the last pull time.
	require.NoError(t, testDB.RecordPullError(ctx, tn.ID, c.ID, "timeout", pulledAt.Add(3*time.Minute)))
	got, err = testDB.GetConnector(ctx, tn.ID, c.ID)
	require.NoError(t, err)
	require.Equal(t, "3", got.Cursor)
	require.Equal(t, pulledAt.Add(2*time.Minute), got.LastPullAt)
	require.Equal(t, "timeout", got.LastError)

	require.ErrorIs(t, testDB.RecordPullError(ctx, tn.ID, "conn_missing", "x", t0), commitlayer.ErrNotFound)
	_, err = recordPull(ctx, testDB, tn.ID, "conn_missing", nil, "9", t0)
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
}

// TestRecordEmptyPulls: one statement records a tenant's pulls that read
// nothing new — the pull time set, the last error cleared, the cursor
// kept — and names the connectors it left alone: another tenant's, an
// unknown one, one whose cursor moved since it was read.
func TestRecordEmptyPulls(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn, other := newTenant(t), newTenant(t)
	mk := func(tenantID, source string) commitlayer.Connector {
		c, err := testDB.CreateConnector(ctx, tenantID, commitlayer.Connector{Source: source, Kind: "http_events", URL: "http://x"})
		require.NoError(t, err)
		return c
	}
	quiet, failing, moved := mk(tn.ID, "payments"), mk(tn.ID, "orders"), mk(tn.ID, "crm")
	foreign := mk(other.ID, "payments")
	require.NoError(t, testDB.RecordPullError(ctx, tn.ID, failing.ID, "timeout", t0))
	_, err := recordPull(ctx, testDB, tn.ID, moved.ID, []commitlayer.Fact{mkFact("crm", "note", "order:o1", "crm-1", t0, nil)}, "7", t0)
	require.NoError(t, err)

	at := t0.Add(time.Minute)
	missed, err := testDB.RecordEmptyPulls(ctx, tn.ID,
		[]string{quiet.ID, failing.ID, moved.ID, foreign.ID, "conn_missing"},
		[]string{"", "", "", "", ""}, at)
	require.NoError(t, err)
	require.Equal(t, []string{moved.ID, foreign.ID, "conn_missing"}, missed)
	for _, id := range []string{quiet.ID, failing.ID} {
		got, err := testDB.GetConnector(ctx, tn.ID, id)
		require.NoError(t, err)
		require.Equal(t, at, got.LastPullAt, id)
		require.Empty(t, got.LastError, id)
		require.True(t, got.LastErrorAt.IsZero(), id)
		require.Empty(t, got.Cursor, id)
	}
	got, err := testDB.GetConnector(ctx, tn.ID, moved.ID)
	require.NoError(t, err)
	require.Equal(t, "7", got.Cursor, "a moved cursor is not touched")
	require.Equal(t, t0, got.LastPullAt)
	got, err = testDB.GetConnector(ctx, other.ID, foreign.ID)
	require.NoError(t, err)
	require.True(t, got.LastPullAt.IsZero(), "another tenant's connector is not touched")

	// Records may land out of order (a pass's empty pulls are recorded
	// beside the tenant's next pull): one older than the connector's
	// latest pull or error leaves them.
	failedAt := at.Add(time.Minute)
	require.NoError(t, testDB.RecordPullError(ctx, tn.ID, quiet.ID, "timeout", failedAt))
	missed, err = testDB.RecordEmptyPulls(ctx, tn.ID, []string{quiet.ID}, []string{""}, at.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, []string{quiet.ID}, missed)
	got, err = testDB.GetConnector(ctx, tn.ID, quiet.ID)
	require.NoError(t, err)
	require.Equal(t, "timeout", got.LastError, "an older empty pull cleared a later error")
	laterAt := failedAt.Add(time.Minute)
	missed, err = testDB.RecordEmptyPulls(ctx, tn.ID, []string{quiet.ID}, []string{""}, laterAt)
	require.NoError(t, err)
	require.Empty(t, missed)
	missed, err = testDB.RecordEmptyPulls(ctx, tn.ID, []string{quiet.ID}, []string{""}, failedAt)
	require.NoError(t, err)
	require.Equal(t, []string{quiet.ID}, missed)
	got, err = testDB.GetConnector(ctx, tn.ID, quiet.ID)
	require.NoError(t, err)
	require.Equal(t, laterAt, got.LastPullAt, "an older empty pull moved the pull time back")
	require.Empty(t, got.LastError)

	missed, err = testDB.RecordEmptyPulls(ctx, tn.ID, nil, nil, at)
	require.NoError(t, err)
	require.Empty(t, missed)
	_, err = testDB.RecordEmptyPulls(ctx, tn.ID, []string{quiet.ID}, nil, at)
	require.ErrorIs(t, err, commitlayer.ErrInvalid)
	_, err = testDB.RecordEmptyPulls(ctx, tn.ID, []string{quiet.ID}, []string{""}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, commitlayer.ErrInvalid)
}

// TestRecordPullAtomic: when the facts cannot be stored, the cursor, the
// pull time and the last error stay as they were, and no fact lands.
func TestRecordPullAtomic(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	good := func(id string) commitlayer.Fact {
		return mkFact("payments", "refund_created", "order:o1", id, t0, nil)
	}
	cases := []struct {
		name  string
		facts []commitlayer.Fact
	}{
		{"invalid fact", []commitlayer.Fact{good("p-2"), {Source: "payments"}}},
		{"refused by postgres", []commitlayer.Fact{good("p-2"),
			mkFact("payments", "refund_created", "order:o1", "p-3", t0, commitlayer.Attrs{"x": "\x00"})}},
		{"another source", []commitlayer.Fact{good("p-2"), mkFact("orders", "x", "order:o1", "o-1", t0, nil)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTenant(t)
			c, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "payments", Kind: "http_events"})
			require.NoError(t, err)
			_, err = recordPull(ctx, testDB, tn.ID, c.ID, []commitlayer.Fact{good("p-1")}, "1", t0)
			require.NoError(t, err)
			require.NoError(t, testDB.RecordPullError(ctx, tn.ID, c.ID, "earlier failure", t0.Add(time.Second)))
			before, err := testDB.GetConnector(ctx, tn.ID, c.ID)
			require.NoError(t, err)
			counts := rowCounts(t, tn.ID)

			_, err = recordPull(ctx, testDB, tn.ID, c.ID, tc.facts, "3", t0.Add(time.Minute))
			require.ErrorIs(t, err, commitlayer.ErrInvalid)

			after, err := testDB.GetConnector(ctx, tn.ID, c.ID)
			require.NoError(t, err)
			require.Equal(t, before, after)
			require.Equal(t, counts, rowCounts(t, tn.ID))
			_, err = testDB.FactsByExternalID(ctx, tn.ID, "payments", "p-2")
			require.ErrorIs(t, err, commitlayer.ErrNotFound)
		})
	}
}
