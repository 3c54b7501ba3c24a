package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestRecordPulls: several connectors' pages in one transaction — each
// connector's cursor moved, its last error cleared and its pull time set,
// the facts of all stored with one notice — and nothing at all when any
// page is refused: an unknown or another tenant's connector, a fact of
// another source, a connector given twice.
func TestRecordPulls(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn, other := newTenant(t), newTenant(t)
	pay, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "payments", Kind: "http_events", URL: "http://x/p"})
	require.NoError(t, err)
	ord, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "orders", Kind: "http_events", URL: "http://x/o", Cursor: "4"})
	require.NoError(t, err)
	crm, err := testDB.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "crm", Kind: "http_events", URL: "http://x/c", Cursor: "1"})
	require.NoError(t, err)
	foreign, err := testDB.CreateConnector(ctx, other.ID, commitlayer.Connector{Source: "ledger", Kind: "http_events", URL: "http://x/l"})
	require.NoError(t, err)
	require.NoError(t, testDB.RecordPullError(ctx, tn.ID, ord.ID, "timeout", t0))
	at := t0.Add(time.Minute)

	res, err := testDB.RecordPulls(ctx, tn.ID, "", []PulledPage{
		{ConnectorID: pay.ID, Cursor: "2", Facts: []commitlayer.Fact{
			mkFact("payments", "refund_created", "order:o1", "payments-1", t0, nil),
			mkFact("payments", "refund_created", "order:o2", "payments-2", t0, nil, "ticket:t1"),
		}},
		{ConnectorID: ord.ID, Cursor: "5", Facts: []commitlayer.Fact{
			mkFact("orders", "order_refunded", "order:o1", "orders-5", t0.Add(time.Second), nil),
		}},
		{ConnectorID: crm.ID, Cursor: "3"}, // only the cursor moves
	}, at)
	require.NoError(t, err)
	require.Equal(t, 3, res.Inserted)
	require.Zero(t, res.Duplicates)
	require.Equal(t, []commitlayer.Subject{"order:o1", "order:o2", "ticket:t1"}, res.Subjects)
	ns := notices(t, testDB, tn.ID)
	require.Len(t, ns, 1)
	require.True(t, ns[0].Digest.Linked)
	require.Len(t, ns[0].Digest.Kinds, 2)
	n, err := testDB.PendingNotifications(ctx, tn.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one notice for the whole batch")
	for id, cursor := range map[string]string{pay.ID: "2", ord.ID: "5", crm.ID: "3"} {
		c, err := testDB.GetConnector(ctx, tn.ID, id)
		require.NoError(t, err)
		require.Equal(t, cursor, c.Cursor, id)
		require.Equal(t, at, c.LastPullAt, id)
		require.Empty(t, c.LastError, id)
		require.True(t, c.LastErrorAt.IsZero(), id)
	}
	facts, err := testDB.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"order:o1", "order:o2"})
	require.NoError(t, err)
	require.Len(t, facts, 3)

	// A page read again counts its duplicates.
	res, err = testDB.RecordPulls(ctx, tn.ID, "", []PulledPage{
		{ConnectorID: pay.ID, Cursor: "3", Facts: []commitlayer.Fact{
			mkFact("payments", "refund_created", "order:o2", "payments-2", t0, nil),
			mkFact("payments", "refund_created", "order:o3", "payments-3", t0, nil),
		}},
		{ConnectorID: crm.ID, Cursor: "3"},
	}, at.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, 1, res.Duplicates)

	// All or nothing.
	good := PulledPage{ConnectorID: pay.ID, Cursor: "9", Facts: []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o9", "payments-9", t0, nil)}}
	for name, c := range map[string]struct {
		bad  PulledPage
		want error
	}{
		"unknown connector":        {PulledPage{ConnectorID: "conn_missing", Cursor: "1"}, commitlayer.ErrNotFound},
		"another tenant's":         {PulledPage{ConnectorID: foreign.ID, Cursor: "1"}, commitlayer.ErrNotFound},
		"a fact of another source": {PulledPage{ConnectorID: ord.ID, Cursor: "6", Facts: []commitlayer.Fact{mkFact("crm", "x", "order:o9", "crm-9", t0, nil)}}, commitlayer.ErrInvalid},
		"a connector given twice":  {PulledPage{ConnectorID: pay.ID, Cursor: "10"}, commitlayer.ErrInvalid},
		"an invalid fact":          {PulledPage{ConnectorID: ord.ID, Cursor: "6", Facts: []commitlayer.Fact{mkFact("orders", "x", "no subject", "orders-6", t0, nil)}}, commitlayer.ErrInvalid},
	} {
		_, err := testDB.RecordPulls(ctx, tn.ID, "", []PulledPage{good, c.bad}, at.Add(2*time.Minute))
		require.ErrorIs(t, err, c.want, name)
		p, err := testDB.GetConnector(ctx, tn.ID, pay.ID)
		require.NoError(t, err)
		require.Equal(t, "3", p.Cursor, name)
		facts, err := testDB.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"order:o9"})
		require.NoError(t, err)
		require.Empty(t, facts, name)
	}
	res, err = testDB.RecordPulls(ctx, tn.ID, "", nil, at)
	require.NoError(t, err)
	require.Equal(t, commitlayer.InsertResult{}, res)
}
