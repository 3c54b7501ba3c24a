package extract_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
	"github.com/commitlayer/commitlayer/sandbox/extract"
)

func newEnterprise(t *testing.T) *sandbox.Enterprise {
	t.Helper()
	e, err := sandbox.New(context.Background(), t.TempDir(), sandbox.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

func bySource(facts []commitlayer.Fact) map[string][]commitlayer.Fact {
	m := map[string][]commitlayer.Fact{}
	for _, f := range facts {
		m[f.Source] = append(m[f.Source], f)
	}
	return m
}

func ofType(facts []commitlayer.Fact, typ string) []commitlayer.Fact {
	var out []commitlayer.Fact
	for _, f := range facts {
		if f.Type == typ {
			out = append(out, f)
		}
	}
	return out
}

func TestPullAllSystemsThenContinueFromCursors(t *testing.T) {
	ctx := context.Background()
	e := newEnterprise(t)
	x := extract.New(e.URL(), nil)

	first, err := x.Pull(ctx)
	require.NoError(t, err)
	require.Empty(t, first.Unreachable)
	src := bySource(first.Facts)
	require.Len(t, src, 7, "every system reports its seeded records")
	for name, facts := range src {
		require.EqualValues(t, len(facts), first.Cursors[name], "%s cursor is its head", name)
		for _, f := range facts {
			require.NoError(t, f.Validate())
		}
	}
	require.ElementsMatch(t, sandbox.Systems, x.Connected())

	// An action after the first pull.
	op := e.Operator()
	_, err = op.Refund(ctx, "o_1001", 2500, "USD", "human")
	require.NoError(t, err)
	_, err = op.AddNote(ctx, "t_1", "Refunded 25.00 USD.", "")
	require.NoError(t, err)

	second, err := x.Pull(ctx)
	require.NoError(t, err)
	require.Len(t, second.Facts, 2, "only what happened since")
	refund := ofType(second.Facts, "refund_created")
	require.Len(t, refund, 1)
	require.Equal(t, commitlayer.Subject("order:o_1001"), refund[0].Subject)
	require.Equal(t, int64(2500), refund[0].Attrs["amount"], "money stays an exact integer")
	note := ofType(second.Facts, "note_added")
	require.Len(t, note, 1)
	require.Contains(t, note[0].Links, commitlayer.Subject("order:o_1001"), "a note on a ticket counts for its order")
	require.Contains(t, note[0].Links, commitlayer.Subject("customer:c_1"))
	require.Equal(t, first.Cursors["payments"]+1, second.Cursors["payments"])
	require.Equal(t, first.Cursors["orders"], second.Cursors["orders"])

	third, err := x.Pull(ctx)
	require.NoError(t, err)
	require.Empty(t, third.Facts)
	require.Equal(t, second.Cursors, third.Cursors)
	require.Equal(t, third.Cursors, x.Cursors())
}

func TestUnreachableSystemIsReported(t *testing.T) {
	ctx := context.Background()
	e := newEnterprise(t)
	tr := chaos.New(nil, e.URL())
	require.NoError(t, tr.Arm(ctx, chaos.Rule{System: "payments", Call: 1, Mode: chaos.Unreachable}))
	x := extract.New(e.URL(), &http.Client{Transport: tr, Timeout: 5 * time.Second})

	rep, err := x.Pull(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Unreachable, 1)
	require.Contains(t, rep.Unreachable["payments"], "unreachable")
	require.Empty(t, bySource(rep.Facts)["payments"])
	require.NotEmpty(t, bySource(rep.Facts)["orders"])
	require.EqualValues(t, 0, rep.Cursors["payments"])
	require.NotContains(t, x.Connected(), "payments")

	// The system is back: the next pull reads it from the start.
	rep, err = x.Pull(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Unreachable)
	require.NotEmpty(t, bySource(rep.Facts)["payments"])
	require.Empty(t, bySource(rep.Facts)["orders"])
	require.Contains(t, x.Connected(), "payments")
}

func TestErrorAnswersAreReportedToo(t *testing.T) {
	for _, status := range []int{403, 429, 500} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			ctx := context.Background()
			e := newEnterprise(t)
			tr := chaos.New(nil, e.URL())
			require.NoError(t, tr.Arm(ctx, chaos.Rule{System: "ledger", Mode: chaos.Error, Status: status}))
			rep, err := extract.New(e.URL(), &http.Client{Transport: tr}).Pull(ctx)
			require.NoError(t, err)
			require.Contains(t, rep.Unreachable["ledger"], strconv.Itoa(status))
			require.Len(t, rep.Unreachable, 1)
		})
	}
}

func TestStaleReadThenSettlementReRead(t *testing.T) {
	ctx := context.Background()
	e := newEnterprise(t)
	tr := chaos.New(nil, e.URL())
	require.NoError(t, tr.Arm(ctx, chaos.Rule{Name: "stale", System: "payments", Call: 1, Mode: chaos.StaleRead}))
	_, err := e.Operator().Refund(ctx, "o_1001", 2500, "USD", "agent")
	require.NoError(t, err)

	x := extract.New(e.URL(), &http.Client{Transport: tr})
	rep, err := x.Pull(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Unreachable, "a stale read is not an outage")
	require.Empty(t, ofType(rep.Facts, "refund_created"), "the refund is hidden")
	require.Equal(t, tr.Snapshot("stale"), rep.Cursors["payments"])

	rep, err = x.Pull(ctx)
	require.NoError(t, err)
	require.Len(t, ofType(rep.Facts, "refund_created"), 1, "the re-read sees it")
}

// A feed that sends ticket events without links: the extractor derives
// them from ticket_opened, across pulls.
func TestLinksDerivedFromTicketEvents(t *testing.T) {
	pages := []string{
		`{"events":[{"id":"tickets-1","seq":1,"type":"ticket_opened","subject":"ticket:t_9","occurred_at":"2026-11-29T10:00:00Z",
		   "attrs":{"customer_id":"c_2","about":"order:o_1002","status":"open"}}],"next":1}`,
		`{"events":[{"id":"tickets-2","seq":2,"type":"note_added","subject":"ticket:t_9","occurred_at":"2026-11-29T10:01:00Z",
		   "attrs":{"note_id":"n_1","body":"hi"}},
		  {"id":"tickets-3","seq":3,"type":"note_added","subject":"ticket:t_10","occurred_at":"2026-11-29T10:02:00Z",
		   "attrs":{"note_id":"n_2","body":"unknown ticket"},"links":["order:o_7"]}],"next":3}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		switch {
		case r.URL.Path != "/tickets/events":
			http.NotFound(w, r)
		case after == 0:
			fmt.Fprint(w, pages[0])
		case after == 1:
			fmt.Fprint(w, pages[1])
		default:
			fmt.Fprintf(w, `{"events":[],"next":%d}`, after)
		}
	}))
	defer srv.Close()
	x := &extract.Extractor{BaseURL: srv.URL, HTTP: srv.Client(), Systems: []string{"tickets"}}
	rep, err := x.Pull(context.Background())
	require.NoError(t, err)
	require.Empty(t, rep.Unreachable)
	require.Equal(t, []commitlayer.Subject{"order:o_1002", "customer:c_2"}, rep.Facts[0].Links)
	rep, err = x.Pull(context.Background())
	require.NoError(t, err)
	require.Len(t, rep.Facts, 2)
	require.Equal(t, []commitlayer.Subject{"order:o_1002", "customer:c_2"}, rep.Facts[0].Links, "derived from the earlier pull")
	require.Equal(t, []commitlayer.Subject{"order:o_7"}, rep.Facts[1].Links, "feed links kept")
	require.EqualValues(t, 3, rep.Cursors["tickets"])
}

func TestBadFeedIsReported(t *testing.T) {
	for name, body := range map[string]string{
		"not json":       `<html>`,
		"missing next":   `{"events":[]}`,
		"bad subject":    `{"events":[{"id":"a","seq":1,"type":"x","subject":"nope","occurred_at":"2026-11-29T10:00:00Z"}],"next":1}`,
		"seq backwards":  `{"events":[{"id":"a","seq":1,"type":"x","subject":"a:b","occurred_at":"2026-11-29T10:00:00Z"}],"next":0}`,
		"more but empty": `{"events":[],"next":0,"more":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, body)
			}))
			defer srv.Close()
			x := &extract.Extractor{BaseURL: srv.URL, HTTP: srv.Client(), Systems: []string{"orders"}}
			rep, err := x.Pull(context.Background())
			require.NoError(t, err)
			require.Contains(t, rep.Unreachable, "orders")
			require.Empty(t, rep.Facts)
			require.EqualValues(t, 0, rep.Cursors["orders"])
		})
	}
}

func TestNothingListening(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	rep, err := extract.New(url, nil).Pull(context.Background())
	require.NoError(t, err)
	require.Len(t, rep.Unreachable, 7)
	require.Empty(t, rep.Facts)
}

func TestCancelledContext(t *testing.T) {
	e := newEnterprise(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := extract.New(e.URL(), nil).Pull(ctx)
	require.ErrorIs(t, err, context.Canceled)
}
