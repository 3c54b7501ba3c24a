package activities_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/postgres"
)

// pageCountingStore counts how pages are stored: one connector's at a
// time (RecordPull) or several together (RecordPulls).
type pageCountingStore struct {
	*postgres.DB
	mu      sync.Mutex
	single  int
	batches [][]string // the connector ids of each RecordPulls
}

func (s *pageCountingStore) RecordPull(ctx context.Context, tenantID, connectorID string, facts []commitlayer.Fact, cursor string, at time.Time) (commitlayer.InsertResult, error) {
	s.mu.Lock()
	s.single++
	s.mu.Unlock()
	return s.DB.RecordPull(ctx, tenantID, connectorID, facts, cursor, at)
}

func (s *pageCountingStore) RecordPulls(ctx context.Context, tenantID string, pages []commitlayer.PulledPage, at time.Time) (commitlayer.InsertResult, error) {
	var ids []string
	for _, p := range pages {
		ids = append(ids, p.ConnectorID)
	}
	s.mu.Lock()
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	return s.DB.RecordPulls(ctx, tenantID, pages, at)
}

// A pull stores the first pages of every connector that brought anything
// in one transaction, and reads a feed with more pages on, one page at a
// time; what it reports (inserted, subjects, the notice) is the sum.
func TestPullStoresFirstPagesTogether(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	feeds := map[string]*feed{"ledger": fx.feed}
	for _, source := range []string{"crm", "orders"} {
		f := &feed{}
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		_, err := fx.db.CreateConnector(ctx, fx.tenant, commitlayer.Connector{Source: source, Kind: "http_events", URL: srv.URL, Cursor: "0"})
		require.NoError(t, err)
		feeds[source] = f
	}
	st := &pageCountingStore{DB: fx.db}
	fx.acts.Store = st
	fx.acts.PageLimit = 2 // the ledger's three events take two pages
	for i := range 3 {
		feeds["ledger"].add("payout_sent", "account:acc_1", fx.now.Add(time.Duration(i)*time.Second), map[string]any{"amount": 10 + i})
	}
	feeds["crm"].add("account_opened", "account:acc_2", fx.now, map[string]any{"status": "active"})
	// orders: nothing

	res := fx.extract(t)
	require.Equal(t, 4, res.Inserted)
	require.Empty(t, res.Unreachable)
	require.Equal(t, []commitlayer.Subject{"account:acc_1", "account:acc_2"}, res.Subjects)
	require.Len(t, st.batches, 1, "the first pages in one transaction")
	require.Len(t, st.batches[0], 2, "crm's and the ledger's; orders had nothing")
	require.Equal(t, 1, st.single, "the ledger's second page on its own")
	conns, err := fx.db.ListConnectors(ctx, fx.tenant)
	require.NoError(t, err)
	cursors := map[string]string{}
	for _, c := range conns {
		cursors[c.Source] = c.Cursor
	}
	require.Equal(t, map[string]string{"crm": "1", "ledger": "3", "orders": "0"}, cursors)
	n, err := fx.db.PendingNotifications(ctx, fx.tenant)
	require.NoError(t, err)
	require.Zero(t, n, "both notices delivered and deleted")
	require.Equal(t, 1, fx.notes.count())

	// One connector with something new: stored on its own.
	feeds["orders"].add("order_placed", "account:acc_3", fx.now, nil)
	res = fx.extract(t)
	require.Equal(t, 1, res.Inserted)
	require.Len(t, st.batches, 1)
	require.Equal(t, 2, st.single)

	// A batch the store refuses fails the pull (a retry reads it again)
	// and stores nothing.
	feeds["crm"].add("account_opened", "account:acc_4", fx.now, nil)
	feeds["orders"].add("order_placed", "account:acc_4", fx.now, nil)
	fx.acts.Store = &failingBatchStore{pageCountingStore: st}
	_, err = fx.env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant})
	require.ErrorContains(t, err, "store pulls of 2 connectors")
	facts, err := fx.db.FactsAbout(ctx, fx.tenant, []commitlayer.Subject{"account:acc_4"})
	require.NoError(t, err)
	require.Empty(t, facts)
	fx.acts.Store = st
	require.Equal(t, 2, fx.extract(t).Inserted)
}

type failingBatchStore struct{ *pageCountingStore }

func (s *failingBatchStore) RecordPulls(context.Context, string, []commitlayer.PulledPage, time.Time) (commitlayer.InsertResult, error) {
	return commitlayer.InsertResult{}, commitlayer.ErrUnavailable
}

// A page the store refuses (a fact it cannot keep: a NUL in a text) is
// its connector's failure, not the database's: the other connectors'
// pages are stored one by one, the source is reported unreachable ("fact
// refused") with its cursor where it was, and the pull goes on.
func TestPullStoresTheOthersWhenTheStoreRefusesOnePage(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	crm := &feed{}
	srv := httptest.NewServer(crm)
	t.Cleanup(srv.Close)
	_, err := fx.db.CreateConnector(ctx, fx.tenant, commitlayer.Connector{Source: "crm", Kind: "http_events", URL: srv.URL, Cursor: "0"})
	require.NoError(t, err)
	st := &pageCountingStore{DB: fx.db}
	fx.acts.Store = st
	fx.feed.add("payout_sent", "account:acc_1", fx.now, map[string]any{"amount": 10})
	crm.add("account_opened", "account:acc_2", fx.now, map[string]any{"note": "a\x00b"})

	res := fx.extract(t)
	require.Equal(t, map[string]string{"crm": activities.FactRefused}, res.Unreachable)
	require.Equal(t, 1, res.Inserted)
	require.Len(t, st.batches, 1, "tried together first")
	require.Equal(t, 2, st.single, "then each on its own")
	facts, err := fx.db.FactsAbout(ctx, fx.tenant, []commitlayer.Subject{"account:acc_1"})
	require.NoError(t, err)
	require.Len(t, facts, 1, "the ledger's page is stored")
	conns, err := fx.db.ListConnectors(ctx, fx.tenant)
	require.NoError(t, err)
	for _, c := range conns {
		switch c.Source {
		case "ledger":
			require.Equal(t, "1", c.Cursor)
			require.Empty(t, c.LastError)
		case "crm":
			require.Equal(t, "0", c.Cursor, "the refused page is not")
			require.Equal(t, activities.FactRefused, c.LastError)
		}
	}
	require.NotContains(t, fx.logs.String(), "a\x00b")

	// Alone (no batch), the same.
	st.batches, st.single = nil, 0
	res = fx.extract(t)
	require.Equal(t, map[string]string{"crm": activities.FactRefused}, res.Unreachable)
	require.Empty(t, st.batches)
	require.Equal(t, 1, st.single)
}
