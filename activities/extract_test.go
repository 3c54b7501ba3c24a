package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/postgres"
)

// pageCountingStore records the connectors of each RecordPulls.
type pageCountingStore struct {
	*postgres.DB
	mu      sync.Mutex
	batches [][]string
	fail    error // when set, every RecordPulls fails with it
}

func (s *pageCountingStore) RecordPulls(ctx context.Context, tenantID, except string, pages []postgres.PulledPage, at time.Time) (commitlayer.InsertResult, error) {
	var ids []string
	for _, p := range pages {
		ids = append(ids, p.ConnectorID)
	}
	s.mu.Lock()
	s.batches = append(s.batches, ids)
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return commitlayer.InsertResult{}, fail
	}
	return s.DB.RecordPulls(ctx, tenantID, except, pages, at)
}

func (fx *fixture) addFeed(t *testing.T, source string) *feed {
	t.Helper()
	f := &feed{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	_, err := fx.db.CreateConnector(context.Background(), fx.tenant, commitlayer.Connector{Source: source, Kind: "http_events", URL: srv.URL, Cursor: "0"})
	require.NoError(t, err)
	return f
}

// TestPullStoresFirstPagesTogether: a pull stores the first pages of every
// connector that brought anything in one transaction, with one notice, and
// reads a feed with more pages on, one page at a time; what it reports is
// the sum. A database that fails the batch fails the pull (a retry reads it
// again) and stores nothing.
func TestPullStoresFirstPagesTogether(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	crm, orders := fx.addFeed(t, "crm"), fx.addFeed(t, "orders")
	st := &pageCountingStore{DB: fx.db}
	fx.acts.Store = st
	fx.acts.PageLimit = 2 // the ledger's three events take two pages
	for i := range 3 {
		fx.feed.add("payout_sent", "account:acc_1", fx.now.Add(time.Duration(i)*time.Second), map[string]any{"amount": 10 + i})
	}
	crm.add("account_opened", "account:acc_2", fx.now, map[string]any{"status": "active"})

	res := fx.extract(t)
	require.Equal(t, 4, res.Inserted)
	require.Empty(t, res.Unreachable)
	require.Equal(t, []commitlayer.Subject{"account:acc_1", "account:acc_2"}, res.Subjects)
	require.Len(t, st.batches, 2)
	require.Len(t, st.batches[0], 2, "crm's and the ledger's first pages together; orders had nothing")
	require.Len(t, st.batches[1], 1, "the ledger's second page on its own")
	cursors := map[string]string{}
	for _, c := range []string{"crm", "ledger", "orders"} {
		cursors[c] = mustConnector(t, fx, c).Cursor
	}
	require.Equal(t, map[string]string{"crm": "1", "ledger": "3", "orders": "0"}, cursors)
	require.Len(t, fx.notices(t), 2, "one notice per transaction that stored facts")

	crm.add("account_opened", "account:acc_4", fx.now, nil)
	orders.add("order_placed", "account:acc_4", fx.now, nil)
	st.fail = commitlayer.ErrUnavailable
	_, err := fx.env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant})
	require.ErrorContains(t, err, "store pulls of 2 connectors")
	facts, err := fx.db.FactsAbout(ctx, fx.tenant, []commitlayer.Subject{"account:acc_4"})
	require.NoError(t, err)
	require.Empty(t, facts)
	st.fail = nil
	require.Equal(t, 2, fx.extract(t).Inserted)
}

// TestPullStoresTheOthersWhenTheStoreRefusesOnePage: a page the store
// refuses (a fact it cannot keep: a NUL in a text) is its connector's
// failure, not the database's: the other connectors' pages are stored one
// by one, the source is reported unreachable ("fact refused") with its
// cursor where it was, and the pull goes on.
func TestPullStoresTheOthersWhenTheStoreRefusesOnePage(t *testing.T) {
	fx := newFixture(t)
	crm := fx.addFeed(t, "crm")
	st := &pageCountingStore{DB: fx.db}
	fx.acts.Store = st
	fx.feed.add("payout_sent", "account:acc_1", fx.now, map[string]any{"amount": 10})
	crm.add("account_opened", "account:acc_2", fx.now, map[string]any{"note": "a\x00b"})

	res := fx.extract(t)
	require.Equal(t, map[string]string{"crm": activities.FactRefused}, res.Unreachable)
	require.Equal(t, 1, res.Inserted)
	require.Len(t, st.batches, 3, "tried together first, then each on its own")
	facts, err := fx.db.FactsAbout(context.Background(), fx.tenant, []commitlayer.Subject{"account:acc_1"})
	require.NoError(t, err)
	require.Len(t, facts, 1, "the ledger's page is stored")
	require.Equal(t, "1", mustConnector(t, fx, "ledger").Cursor)
	require.Empty(t, mustConnector(t, fx, "ledger").LastError)
	require.Equal(t, "0", mustConnector(t, fx, "crm").Cursor, "the refused page is not")
	require.Equal(t, activities.FactRefused, mustConnector(t, fx, "crm").LastError)
	require.NotContains(t, fx.logs.String(), "a\x00b")

	// Alone, the same, in one try.
	st.batches = nil
	res = fx.extract(t)
	require.Equal(t, map[string]string{"crm": activities.FactRefused}, res.Unreachable)
	require.Len(t, st.batches, 1)
}

// TestPullHonoursAConnectorsMaxPages: an http_json connector's max_pages
// bounds the pages one pull reads; the next pull goes on from its cursor.
func TestPullHonoursAConnectorsMaxPages(t *testing.T) {
	fx := newFixture(t)
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		mu.Lock()
		asked = append(asked, r.URL.RawQuery)
		mu.Unlock()
		var data []map[string]any
		for i := after + 1; i <= 5 && len(data) < 2; i++ {
			data = append(data, map[string]any{"id": fmt.Sprintf("re_%d", i), "order": fmt.Sprintf("o_%d", i),
				"created": fx.now.Add(time.Duration(i) * time.Second).Format(time.RFC3339)})
		}
		last := after + len(data)
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "next": strconv.Itoa(last), "more": last < 5})
	}))
	t.Cleanup(srv.Close)
	cfg := fmt.Sprintf(`{"url":%q,"cursor_param":"after","items":"/data","next":"/next","has_more":"/more",
		"type":"refund_created","subject":"/order","subject_type":"order","external_id":"/id","occurred_at":"/created","max_pages":2}`, srv.URL)
	_, err := fx.db.CreateConnector(context.Background(), fx.tenant, commitlayer.Connector{Source: "refunds", Kind: "http_json", Config: json.RawMessage(cfg)})
	require.NoError(t, err)

	require.Equal(t, 4, fx.extract(t).Inserted, "two pages of two")
	require.Equal(t, "4", mustConnector(t, fx, "refunds").Cursor)
	mu.Lock()
	require.Equal(t, []string{"", "after=2"}, asked)
	mu.Unlock()
	require.Equal(t, 1, fx.extract(t).Inserted, "the next pull goes on from the cursor")
	require.Equal(t, "5", mustConnector(t, fx, "refunds").Cursor)
}
