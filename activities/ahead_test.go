package activities_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
)

// askedFeed is a feed that tells each request's cursor ("after") on a
// channel as it arrives, and keeps them in order.
type askedFeed struct {
	*feed
	mu    sync.Mutex
	after []string
	asked chan string
}

func newAskedFeed() *askedFeed { return &askedFeed{feed: &feed{}, asked: make(chan string, 64)} }

func (f *askedFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	after := r.URL.Query().Get("after")
	f.mu.Lock()
	f.after = append(f.after, after)
	f.mu.Unlock()
	select {
	case f.asked <- after:
	default:
	}
	f.feed.ServeHTTP(w, r)
}

func (f *askedFeed) cursors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.after...)
}

// listingStore runs beforeList inside each ListConnectors, before the
// store's answer.
type listingStore struct {
	activities.Store
	beforeList func()
}

func (s *listingStore) ListConnectors(ctx context.Context, tenantID string) ([]commitlayer.Connector, error) {
	if s.beforeList != nil {
		s.beforeList()
	}
	return s.Store.ListConnectors(ctx, tenantID)
}

// aheadFixture is a tenant with one http_events connector (source ledger)
// on an askedFeed.
func aheadFixture(t *testing.T) (*fixture, *askedFeed) {
	t.Helper()
	fx := newFixture(t)
	ctx := context.Background()
	conns, err := fx.db.ListConnectors(ctx, fx.tenant)
	require.NoError(t, err)
	for _, c := range conns {
		require.NoError(t, fx.db.DeleteConnector(ctx, fx.tenant, c.ID))
	}
	f := newAskedFeed()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	_, err = fx.db.CreateConnector(ctx, fx.tenant, commitlayer.Connector{Source: "ledger", Kind: "http_events", URL: srv.URL})
	require.NoError(t, err)
	return fx, f
}

// A tenant's second pull asks the feed from the cursor the first one left
// before its listing has answered, and keeps that answer: one request, not
// two, and the facts it brought stored.
func TestPullAsksTheFeedBesideTheListing(t *testing.T) {
	fx, f := aheadFixture(t)
	f.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	require.Equal(t, 1, fx.extract(t).Inserted)
	require.Equal(t, []string{"0"}, f.cursors(), "the first pull lists first: nothing to ask ahead")
	<-f.asked

	f.add("payout_sent", "account:acc_1", fx.now, map[string]any{"amount": 10})
	// The listing answers only once the feed has been asked (or after 10 s,
	// and then the feed was not asked ahead).
	var askedFirst bool
	fx.acts.Store = &listingStore{Store: fx.db, beforeList: func() {
		select {
		case <-f.asked:
			askedFirst = true
		case <-time.After(10 * time.Second):
		}
	}}
	res := fx.extract(t)
	require.True(t, askedFirst, "the feed was asked before the listing answered")
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, []string{"0", "1"}, f.cursors(), "one request from the cursor the first pull left")
	require.Equal(t, activities.AheadStats{Hits: 1}, activities.PullAheadStats(fx.acts))
	got, err := fx.db.ListConnectors(context.Background(), fx.tenant)
	require.NoError(t, err)
	require.Equal(t, "2", got[0].Cursor)

	// Nothing new: asked ahead again, kept, nothing stored.
	fx.acts.Store = fx.db
	res = fx.extract(t)
	require.Zero(t, res.Inserted)
	require.Equal(t, []string{"0", "1", "2"}, f.cursors())
	require.Equal(t, activities.AheadStats{Hits: 2}, activities.PullAheadStats(fx.acts))
}

// A cursor another process moved meanwhile: the answer asked ahead (from
// the old cursor) is dropped and the feed asked again from the listed one,
// so nothing is stored twice or skipped; the tenant's next pulls then list
// first for a while.
func TestPullAheadDropsAnAnswerFromAMovedCursor(t *testing.T) {
	fx, f := aheadFixture(t)
	ctx := context.Background()
	f.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	require.Equal(t, 1, fx.extract(t).Inserted)

	// Another worker pulls the next event.
	f.add("payout_sent", "account:acc_1", fx.now, map[string]any{"amount": 10})
	other := &activities.Activities{Store: fx.db, Now: fx.acts.Now, Logger: slog.New(slog.DiscardHandler)}
	_, err := other.Extract(ctx, activities.ExtractInput{TenantID: fx.tenant})
	require.NoError(t, err)

	f.add("payout_sent", "account:acc_1", fx.now.Add(time.Second), map[string]any{"amount": 20})
	for len(f.asked) > 0 {
		<-f.asked
	}
	// The listing answers once the feed has been asked ahead (a dropped
	// request may otherwise be cancelled before it is sent).
	fx.acts.Store = &listingStore{Store: fx.db, beforeList: func() {
		select {
		case <-f.asked:
		case <-time.After(10 * time.Second):
		}
	}}
	res := fx.extract(t)
	fx.acts.Store = fx.db
	require.Equal(t, 1, res.Inserted, "only the event after the listed cursor")
	require.Zero(t, res.Duplicates)
	require.Equal(t, []string{"0", "1", "1", "2"}, f.cursors(), "asked ahead from 1, dropped, asked again from 2")
	require.Equal(t, activities.AheadStats{Misses: 1}, activities.PullAheadStats(fx.acts))
	facts, err := fx.db.FactsAbout(ctx, fx.tenant, []commitlayer.Subject{"account:acc_1"})
	require.NoError(t, err)
	require.Len(t, facts, 3)

	// After a miss the tenant's pulls list first.
	require.Zero(t, fx.extract(t).Inserted)
	require.Equal(t, []string{"0", "1", "1", "2", "3"}, f.cursors())
	require.Equal(t, activities.AheadStats{Misses: 1}, activities.PullAheadStats(fx.acts))
}

// A connector removed since the last pull: its feed, asked ahead, is
// dropped, and nothing of it is stored.
func TestPullAheadDropsARemovedConnector(t *testing.T) {
	fx, f := aheadFixture(t)
	ctx := context.Background()
	crm := newAskedFeed()
	crmSrv := httptest.NewServer(crm)
	t.Cleanup(crmSrv.Close)
	c, err := fx.db.CreateConnector(ctx, fx.tenant, commitlayer.Connector{Source: "crm", Kind: "http_events", URL: crmSrv.URL})
	require.NoError(t, err)
	fx.extract(t)
	require.NoError(t, fx.db.DeleteConnector(ctx, fx.tenant, c.ID))
	crm.add("account_opened", "account:acc_9", fx.now, map[string]any{"status": "active"})

	res := fx.extract(t)
	require.Zero(t, res.Inserted)
	require.Equal(t, activities.AheadStats{Hits: 1, Misses: 1}, activities.PullAheadStats(fx.acts))
	facts, err := fx.db.FactsAbout(ctx, fx.tenant, []commitlayer.Subject{"account:acc_9"})
	require.NoError(t, err)
	require.Empty(t, facts)
	require.Len(t, f.cursors(), 2)
}

// A feed that fails when asked ahead fails the pull as it would have
// failed after the listing: the source is reported unreachable and the
// error recorded; the next pull lists first for that connector.
func TestPullAheadFailureIsTheSourcesFailure(t *testing.T) {
	fx, f := aheadFixture(t)
	f.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	require.Equal(t, 1, fx.extract(t).Inserted)
	f.feed.mu.Lock()
	f.feed.down = true
	f.feed.mu.Unlock()
	res := fx.extract(t)
	require.Equal(t, "http 503", res.Unreachable["ledger"])
	require.Equal(t, activities.AheadStats{Hits: 1}, activities.PullAheadStats(fx.acts))
	got, err := fx.db.ListConnectors(context.Background(), fx.tenant)
	require.NoError(t, err)
	require.Equal(t, "http 503", got[0].LastError)

	f.feed.mu.Lock()
	f.feed.down = false
	f.feed.mu.Unlock()
	require.Empty(t, fx.extract(t).Unreachable)
	require.Equal(t, activities.AheadStats{Hits: 1}, activities.PullAheadStats(fx.acts), "its cursor unknown: listed first")
	require.Len(t, f.cursors(), 3)
}
