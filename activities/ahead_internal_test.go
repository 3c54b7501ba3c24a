package activities

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// connectorsStore is a store of one tenant's connectors, the only part of
// Store a pull of feeds with nothing new touches. It logs the order of
// listings ("list") beside the pull's listed hook ("listed").
type connectorsStore struct {
	Store // nil: a pull that touches anything else panics
	mu    sync.Mutex
	conns []commitlayer.Connector
	log   *[]string
}

func (s *connectorsStore) ListConnectors(context.Context, string) ([]commitlayer.Connector, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.log = append(*s.log, "list")
	return append([]commitlayer.Connector(nil), s.conns...), nil
}

func (s *connectorsStore) RecordEmptyPulls(context.Context, string, []string, []string, time.Time) ([]string, error) {
	return nil, nil
}

// RecordPull records a page with no facts (a cursor's move).
func (s *connectorsStore) RecordPull(_ context.Context, _, id string, facts []commitlayer.Fact, cursor string, _ time.Time) (commitlayer.InsertResult, error) {
	if len(facts) > 0 {
		panic("connectorsStore: facts")
	}
	s.setCursor(id, cursor)
	return commitlayer.InsertResult{}, nil
}

func (s *connectorsStore) setCursor(id, cursor string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.conns {
		if s.conns[i].ID == id {
			s.conns[i].Cursor = cursor
		}
	}
}

func (s *connectorsStore) add(c commitlayer.Connector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, c)
}

// emptyFeed is an http_events feed with nothing after any cursor.
func emptyFeed(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		_ = json.NewEncoder(w).Encode(map[string]any{"events": []any{}, "next": after, "more": false})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A pull that asks every connector ahead calls its listed hook before its
// listing (a pass's read starts beside it), and is quiet — the read kept
// — only when the listing confirms every connector at the cursor it was
// asked from: not when another process moved a cursor meanwhile, nor when
// a connector was added.
func TestPullReadsEarlyOnlyWhatTheListingConfirms(t *testing.T) {
	var log []string
	st := &connectorsStore{log: &log, conns: []commitlayer.Connector{
		{ID: "c1", Source: "ledger", Kind: "http_events", URL: emptyFeed(t), Cursor: "5"},
		{ID: "c2", Source: "crm", Kind: "http_events", URL: emptyFeed(t), Cursor: "7"},
	}}
	a := &Activities{Store: st}
	pullOnce := func() pullOutcome {
		t.Helper()
		log = nil
		out, finish := a.pullTenantThen(context.Background(), "t_1", "", func() { log = append(log, "listed") })
		require.NoError(t, out.err)
		require.NoError(t, finish(context.Background()))
		return out
	}

	out := pullOnce()
	require.Equal(t, []string{"list", "listed"}, log, "nothing remembered: the listing first")
	require.True(t, out.res.quiet)

	out = pullOnce()
	require.Equal(t, []string{"listed", "list"}, log, "every connector asked ahead: the read starts beside the listing")
	require.True(t, out.res.quiet, "the listing confirmed both cursors")

	st.setCursor("c2", "9") // another worker pulled crm meanwhile
	out = pullOnce()
	require.Equal(t, []string{"listed", "list"}, log)
	require.False(t, out.res.quiet, "a cursor moved after the read began: read again")
	require.Equal(t, AheadStats{Hits: 3, Misses: 1}, PullAheadStats(a))

	// After the miss the tenant lists first (aheadOffFor); let it lapse.
	a.ahead.mu.Lock()
	a.ahead.tenants["t_1"].offUntil = time.Time{}
	a.ahead.mu.Unlock()
	out = pullOnce()
	require.Equal(t, []string{"listed", "list"}, log)
	require.True(t, out.res.quiet, "asked from 9, confirmed")

	st.add(commitlayer.Connector{ID: "c3", Source: "orders", Kind: "http_events", URL: emptyFeed(t), Cursor: "3"})
	out = pullOnce()
	require.Equal(t, []string{"listed", "list"}, log)
	require.False(t, out.res.quiet, "a connector the read may have started before")

	out = pullOnce()
	require.Equal(t, []string{"listed", "list"}, log)
	require.True(t, out.res.quiet, "all three remembered and confirmed")
}
