package systems_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

func TestEventFeed(t *testing.T) {
	e := newEnterprise(t)
	for _, system := range sandbox.Systems {
		t.Run(system, func(t *testing.T) {
			all := feed(t, e, system)
			require.NotEmpty(t, all, "the seed emits creation events")
			var prev time.Time
			for i, ev := range all {
				require.Equal(t, int64(i+1), ev.Seq, "seqs start at 1 and have no gap")
				require.Equal(t, fmt.Sprintf("%s-%d", system, i+1), ev.ID)
				at, err := time.Parse(time.RFC3339, ev.OccurredAt)
				require.NoError(t, err)
				require.False(t, at.Before(prev), "occurred_at never goes back")
				require.True(t, at.Before(e.Clock().Start()), "seeded before the clock starts")
				prev = at
				require.True(t, json.Valid(ev.Attrs))
				require.Equal(t, byte('{'), ev.Attrs[0])
				require.Equal(t, byte('['), ev.Links[0])
			}
			n := int64(len(all))

			page := func(query string) systems.Feed {
				r := call(t, e, "GET", "/"+system+"/events"+query, "", "")
				require.Equal(t, http.StatusOK, r.status, "%s", r.body)
				var f systems.Feed
				require.NoError(t, json.Unmarshal(r.body, &f))
				return f
			}
			f := page("")
			require.Len(t, f.Events, int(n), "no cursor reads from the start")
			require.Equal(t, n, f.Next)
			require.False(t, f.More)

			f = page("?after=1&limit=2")
			require.Equal(t, []int64{2, 3}, []int64{f.Events[0].Seq, f.Events[1].Seq})
			require.Equal(t, int64(3), f.Next)
			require.Equal(t, n > 3, f.More)

			f = page(fmt.Sprintf("?after=%d", n-1))
			require.Len(t, f.Events, 1)
			require.Equal(t, n, f.Next)
			require.False(t, f.More)

			f = page(fmt.Sprintf("?after=%d&limit=1", n))
			require.Empty(t, f.Events)
			require.NotNil(t, f.Events, "events is [] not null")
			require.Equal(t, n, f.Next, "an empty page keeps the cursor")
			require.False(t, f.More)

			f = page("?after=1000000")
			require.Empty(t, f.Events)
			require.Equal(t, int64(1000000), f.Next)

			f = page("?limit=999999")
			require.Len(t, f.Events, int(n), "a limit above the maximum is clamped")
		})
	}
}

func TestEventFeedBadQuery(t *testing.T) {
	e := newEnterprise(t)
	for _, q := range []string{
		"after=-1", "after=abc", "after=1.5", "after=", "after=1e3", "after=99999999999999999999",
		"limit=0", "limit=-1", "limit=abc", "limit=", "limit=2.5",
	} {
		t.Run(q, func(t *testing.T) {
			r := call(t, e, "GET", "/payments/events?"+q, "", "")
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			require.Equal(t, "invalid_request", r.errCode(t))
		})
	}
}

// TestEventsFollowWrites: the feed shows each write's events, in order,
// stamped one second apart.
func TestEventsFollowWrites(t *testing.T) {
	e := newEnterprise(t)
	start := e.Clock().Last()
	require.Equal(t, start.Add(systems.Between), e.Clock().Now())
	n := len(feed(t, e, "tickets"))
	for i := range 3 {
		r := call(t, e, "POST", "/tickets/tickets/t_1/notes", fmt.Sprintf(`{"body":"note %d"}`, i), "")
		require.Equal(t, http.StatusOK, r.status)
	}
	evs := eventsAfter(t, e, "tickets", n)
	require.Len(t, evs, 3)
	for i, ev := range evs {
		require.Equal(t, fmt.Sprintf("note %d", i), attrs(t, ev)["body"])
		at, err := time.Parse(time.RFC3339, ev.OccurredAt)
		require.NoError(t, err)
		require.Equal(t, start.Add(time.Duration(i+1)*time.Second), at)
	}
	require.True(t, e.Clock().Now().After(start.Add(3*time.Second)), "now is after the last event")
	require.True(t, e.Clock().Now().Before(start.Add(4*time.Second)), "and before the next")
}

// TestWriteIsAtomic: a write that fails after emitting leaves neither its
// state change nor its event, nor a clock reading in the file.
func TestWriteIsAtomic(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := systems.NewClock(start, start)
	path := filepath.Join(t.TempDir(), "orders.db")
	sys, err := systems.Create(ctx, systems.Orders, path, clock)
	require.NoError(t, err)
	defer sys.Close()

	boom := errors.New("boom")
	err = sys.Write(ctx, func(tx *systems.Tx) error {
		if _, err := tx.Exec(`INSERT INTO discounts(id, order_id, percent, created_at) VALUES ('d_1', 'o_1', 5, 'x')`); err != nil {
			return err
		}
		if err := tx.Emit("discount_applied", "order:o_1", map[string]any{"percent": 5}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	var n int
	require.NoError(t, sys.DB().QueryRow(`SELECT (SELECT COUNT(*) FROM events) + (SELECT COUNT(*) FROM discounts)`).Scan(&n))
	require.Zero(t, n, "no event without the write, no write without the event")
	stored, err := storedClock(sys)
	require.NoError(t, err)
	require.Equal(t, start, stored, "the failed write's time is not stored")

	require.NoError(t, sys.Write(ctx, func(tx *systems.Tx) error {
		return tx.Emit("discount_applied", "order:o_1", map[string]any{"percent": 5})
	}))
	stored, err = storedClock(sys)
	require.NoError(t, err)
	require.Equal(t, clock.Last(), stored)
	require.Equal(t, start.Add(time.Second), stored)
	require.NoError(t, sys.DB().QueryRow(`SELECT COUNT(*) FROM events`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestCreateRefusesWrongFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := systems.NewClock(time.Unix(0, 0), time.Unix(0, 0))
	_, err := systems.Create(ctx, "hr", filepath.Join(dir, "hr.db"), clock)
	require.ErrorContains(t, err, "unknown system")
	s, err := systems.Create(ctx, systems.Orders, filepath.Join(dir, "orders.db"), clock)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = systems.Create(ctx, systems.Orders, filepath.Join(dir, "orders.db"), clock)
	require.ErrorContains(t, err, "already exists")
}

// FuzzRoutes sends arbitrary bodies and keys to every write route: the
// systems answer JSON and never 500.
func FuzzRoutes(f *testing.F) {
	for i, wr := range writeRoutes {
		f.Add(uint8(i), []byte(wr.body), "")
		f.Add(uint8(i), []byte(wr.other), "key")
	}
	f.Add(uint8(0), []byte(`{"order_id":"o_1001","amount":-9223372036854775808,"currency":"USD"}`), "k")
	f.Add(uint8(16), []byte(`{"product_id":"p_acme","account_id":"a","side":"buy","quantity":1000000,"limit_price":100000000000}`), "")
	f.Add(uint8(3), []byte("\xff\xfe"), "\x00")
	e := newEnterprise(f)
	op := e.Operator()
	_, err := op.Refund(ctx, "o_1002", 100, "USD", "")
	require.NoError(f, err)
	_, err = op.SendPayout(ctx, "acc_1", 100, "USD")
	require.NoError(f, err)
	_, err = op.Deploy(ctx, "svc_api", "2", "staging")
	require.NoError(f, err)
	_, err = op.PlaceOrder(ctx, tradeReq)
	require.NoError(f, err)
	h := e.Handler()
	f.Fuzz(func(t *testing.T, route uint8, body []byte, key string) {
		wr := writeRoutes[int(route)%len(writeRoutes)]
		req := httptest.NewRequest("POST", wr.path, strings.NewReader(string(body)))
		if key != "" && !strings.ContainsAny(key, "\r\n\x00") {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.NotEqual(t, http.StatusInternalServerError, rec.Code, "%s %s → %s", wr.path, body, rec.Body)
		require.True(t, json.Valid(rec.Body.Bytes()), "%s", rec.Body)
		if rec.Code != http.StatusOK {
			var eb struct{ Error systems.APIError }
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
			require.NotEmpty(t, eb.Error.Code)
		}
	})
}

// TestWriteFinishesWhenClientLeaves: a write whose caller has gone (its
// context cancelled) still commits, as on a real server; the caller cannot
// know, which is the lost-response case.
func TestWriteFinishesWhenClientLeaves(t *testing.T) {
	e := newEnterprise(t)
	n := len(feed(t, e, "payments"))
	c, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest("POST", "/payments/refunds", strings.NewReader(`{"order_id":"o_1001","amount":100,"currency":"USD"}`)).WithContext(c)
	req.Header.Set("Idempotency-Key", "gone")
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	require.Equal(t, []string{"refund_created"}, types(eventsAfter(t, e, "payments", n)))
	again := call(t, e, "POST", "/payments/refunds", `{"order_id":"o_1001","amount":100,"currency":"USD"}`, "gone")
	require.True(t, again.replayed, "the retry with the key finds the committed refund")
}

// storedClock is the time of the last committed write, as the file's meta
// table records it.
func storedClock(sys *systems.System) (time.Time, error) {
	var v string
	if err := sys.DB().QueryRow(`SELECT value FROM meta WHERE key = 'clock'`).Scan(&v); err != nil {
		return time.Time{}, err
	}
	return time.Parse(systems.TimeFormat, v)
}
