package stripepay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/stripefake"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

var ctx = context.Background()

// secretKey is unique to these tests so a search for it finds nothing else.
const secretKey = "sk_test_KeyMustNeverLeak0123456789abcdef"

func env(vals map[string]string) func(string) string {
	return func(k string) string { return vals[k] }
}

func TestKeyRules(t *testing.T) {
	tests := []struct {
		name string
		key  string
		err  error
	}{
		{"unset", "", stripepay.ErrNoKey},
		{"live secret key", "sk_live_abcdefgh12345678", stripepay.ErrNotTestKey},
		{"restricted test key", "rk_test_abcdefgh12345678", stripepay.ErrNotTestKey},
		{"publishable key", "pk_test_abcdefgh12345678", stripepay.ErrNotTestKey},
		{"prefix only", "sk_test_", stripepay.ErrNotTestKey},
		{"junk after the prefix", "sk_test_abc def", stripepay.ErrNotTestKey},
		{"test secret key", secretKey, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := stripefake.Start(stripefake.Options{})
			defer f.Close()
			cfg, err := stripepay.ConfigFromEnv(env(map[string]string{stripepay.EnvKey: tc.key, stripepay.EnvBase: f.URL()}))
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				if len(tc.key) > len("sk_test_") {
					require.NotContains(t, err.Error(), tc.key)
				}
				// Refused before a single call, also when New is given it directly.
				_, err = stripepay.New(stripepay.Config{Key: tc.key, BaseURL: f.URL()})
				require.ErrorIs(t, err, tc.err)
				require.Empty(t, f.Requests())
				return
			}
			require.NoError(t, err)
			require.Equal(t, f.URL(), cfg.BaseURL)
			require.Equal(t, tc.key, cfg.Key)
		})
	}
}

// logBuffer collects everything logged.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type rig struct {
	fake  *stripefake.Fake
	e     *sandbox.Enterprise
	be    *stripepay.Backend
	logs  *logBuffer
	dir   string
	bodys *bytes.Buffer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	fake := stripefake.Start(stripefake.Options{Keys: []string{secretKey}})
	t.Cleanup(fake.Close)
	logs := &logBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	cfg, err := stripepay.ConfigFromEnv(env(map[string]string{stripepay.EnvKey: secretKey, stripepay.EnvBase: fake.URL()}))
	require.NoError(t, err)
	cl, err := stripepay.New(cfg)
	require.NoError(t, err)
	r := &rig{fake: fake, logs: logs, dir: t.TempDir(), bodys: &bytes.Buffer{}}
	e, err := sandbox.New(ctx, r.dir, sandbox.Options{
		Now: func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) },
		Payments: func(sys *systems.System) systems.PaymentsBackend {
			r.be = cl.NewBackend(sys)
			return r.be
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	r.e = e
	return r
}

func (r *rig) post(t *testing.T, path, body, key string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.e.URL()+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r.bodys.Write(b)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return res.StatusCode, m
}

func (r *rig) events(t *testing.T) []systems.Event {
	t.Helper()
	res, err := http.Get(r.e.SystemURL("payments") + "/events?limit=5000")
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r.bodys.Write(b)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", b)
	var feed systems.Feed
	require.NoError(t, json.Unmarshal(b, &feed))
	return feed.Events
}

func refundsOf(evs []systems.Event) map[string]systems.Event {
	out := map[string]systems.Event{}
	for _, ev := range evs {
		if ev.Type == "refund_created" {
			var a struct {
				RefundID string `json:"refund_id"`
			}
			_ = json.Unmarshal(ev.Attrs, &a)
			out[a.RefundID] = ev
		}
	}
	return out
}

func TestSeedCreatesConfirmedPaymentIntents(t *testing.T) {
	r := newRig(t)
	var creates []stripefake.Request
	for _, q := range r.fake.Requests() {
		if q.Method == http.MethodPost && q.Path == "/v1/payment_intents" {
			creates = append(creates, q)
		}
	}
	seed := sandbox.DefaultSeed()
	want := map[string]int64{}
	for _, o := range seed.Orders {
		if o.Status == "paid" || o.Status == "shipped" {
			want[o.ID] = o.Total
		}
	}
	require.Len(t, creates, len(want))
	for _, q := range creates {
		order := q.Form.Get("metadata[order_id]")
		require.Contains(t, want, order)
		require.Equal(t, "usd", q.Form.Get("currency"))
		require.Equal(t, "pm_card_visa", q.Form.Get("payment_method"))
		require.Equal(t, "card", q.Form.Get("payment_method_types[0]"))
		require.Equal(t, "true", q.Form.Get("confirm"))
		require.Equal(t, want[order], mustInt(t, q.Form.Get("amount")))
		pi, err := r.be.PaymentIntent(ctx, order)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(pi, "pi_"))
		ch, err := r.be.Charge(ctx, order)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(ch.ID, "ch_"), "the local charge carries Stripe's id, got %s", ch.ID)
	}
	_, err := r.be.PaymentIntent(ctx, "o_1003")
	require.Error(t, err, "a pending order has no PaymentIntent")
}

func mustInt(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

func TestRefundsGoToStripe(t *testing.T) {
	r := newRig(t)
	refund := func(amount int, key string) (int, map[string]any) {
		return r.post(t, "/payments/refunds", `{"order_id":"o_1006","amount":`+strconv.Itoa(amount)+`,"currency":"USD","reason":"item missing"}`, key)
	}
	// With a key: forwarded (namespaced to the run); a retry replays.
	status, m := refund(1000, "agent-key-1")
	require.Equal(t, http.StatusOK, status, "%v", m)
	require.True(t, strings.HasPrefix(m["id"].(string), "re_"))
	require.Equal(t, "succeeded", m["status"])
	status, m2 := refund(1000, "agent-key-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, m["id"], m2["id"])
	require.Len(t, r.fake.Refunds(), 1)
	last := r.lastRefundRequest(t)
	require.Contains(t, last.IdempotencyKey, "agent-key-1")
	require.Equal(t, "1000", last.Form.Get("amount"))
	require.Equal(t, "o_1006", last.Form.Get("metadata[order_id]"))

	// Without a key: none reaches Stripe, and a retry refunds twice.
	for range 2 {
		status, _ := refund(500, "")
		require.Equal(t, http.StatusOK, status)
		require.Empty(t, r.lastRefundRequest(t).IdempotencyKey)
	}
	require.Len(t, r.fake.Refunds(), 3)

	// Over what is left, then the rest, then again: Stripe's 400s.
	status, m = refund(75000, "")
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "amount_too_large", m["error"].(map[string]any)["code"])
	status, _ = refund(73000, "")
	require.Equal(t, http.StatusOK, status)
	status, m = refund(1, "k-spent")
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "charge_already_refunded", m["error"].(map[string]any)["code"])
	status, m = refund(1, "k-spent") // a stored refusal replays
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "charge_already_refunded", m["error"].(map[string]any)["code"])

	// Local refusals never reach Stripe.
	n := len(r.fake.Requests())
	status, _ = r.post(t, "/payments/refunds", `{"order_id":"o_1006","amount":1,"currency":"EUR"}`, "")
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = r.post(t, "/payments/refunds", `{"order_id":"o_1003","amount":1,"currency":"USD"}`, "")
	require.Equal(t, http.StatusNotFound, status)
	require.Len(t, r.fake.Requests(), n)

	// Each Stripe refund has exactly one refund_created, with its id.
	evs := refundsOf(r.events(t))
	require.Len(t, evs, 4)
	for _, rf := range r.fake.Refunds() {
		ev, ok := evs[rf["id"].(string)]
		require.True(t, ok, "no event for %s", rf["id"])
		require.Equal(t, "order:o_1006", ev.Subject)
	}
	ch, err := r.be.Charge(ctx, "o_1006")
	require.NoError(t, err)
	require.Equal(t, int64(75000), ch.Refunded)
}

func (r *rig) lastRefundRequest(t *testing.T) stripefake.Request {
	t.Helper()
	reqs := r.fake.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Method == http.MethodPost && reqs[i].Path == "/v1/refunds" {
			return reqs[i]
		}
	}
	t.Fatal("no refund request")
	return stripefake.Request{}
}

func TestReconcileAppendsOutsideRefundsOnce(t *testing.T) {
	r := newRig(t)
	before := r.events(t)
	status, _ := r.post(t, "/payments/refunds", `{"order_id":"o_1001","amount":2000,"currency":"USD"}`, "k1")
	require.Equal(t, http.StatusOK, status)
	pi, err := r.be.PaymentIntent(ctx, "o_1001")
	require.NoError(t, err)
	outside, err := r.fake.RefundOutside(pi, 3000) // made in the dashboard
	require.NoError(t, err)
	last := r.e.Clock().Last()

	evs := r.events(t)
	require.Len(t, evs, len(before)+2)
	got := refundsOf(evs)
	ev, ok := got[outside]
	require.True(t, ok)
	var attrs map[string]any
	require.NoError(t, json.Unmarshal(ev.Attrs, &attrs))
	require.Equal(t, map[string]any{"refund_id": outside, "amount": float64(3000), "currency": "USD", "reason": "", "status": "succeeded"}, attrs)
	require.Equal(t, "order:o_1001", ev.Subject)
	require.Equal(t, last.Add(time.Second).Format(time.RFC3339), ev.OccurredAt, "on the virtual clock")

	// Read again: nothing new, same sequence numbers.
	again := r.events(t)
	require.Equal(t, evs, again)
	ch, err := r.be.Charge(ctx, "o_1001")
	require.NoError(t, err)
	require.Equal(t, int64(5000), ch.Refunded)

	// A Stripe outage fails the read rather than answering stale.
	r.fake.FailNext(http.MethodGet, "/v1/refunds", http.StatusInternalServerError, 1)
	res, err := http.Get(r.e.SystemURL("payments") + "/events")
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusBadGateway, res.StatusCode, "%s", b)
	require.Len(t, r.events(t), len(evs))
}

func TestBillingStopStaysLocal(t *testing.T) {
	r := newRig(t)
	n := len(r.fake.Requests())
	status, _ := r.post(t, "/payments/billing/stop", `{"subscription_id":"sub_1"}`, "")
	require.Equal(t, http.StatusOK, status)
	require.Len(t, r.fake.Requests(), n)
}

// TestKeyNeverWritten runs the whole path, then searches every file the
// enterprise wrote, every log line and every answer for the key.
func TestKeyNeverWritten(t *testing.T) {
	r := newRig(t)
	r.post(t, "/payments/refunds", `{"order_id":"o_1001","amount":12000,"currency":"USD"}`, "")
	r.post(t, "/payments/refunds", `{"order_id":"o_1001","amount":12000,"currency":"USD"}`, "")
	r.fake.FailNext(http.MethodPost, "/v1/refunds", http.StatusInternalServerError, 1)
	r.post(t, "/payments/refunds", `{"order_id":"o_1002","amount":1,"currency":"USD"}`, "")
	r.events(t)
	require.NoError(t, r.e.Close())

	// A backend with a key Stripe refuses: its errors and logs too.
	bad := "sk_test_RefusedKey0987654321zyxwvu"
	cl, err := stripepay.New(stripepay.Config{Key: bad, BaseURL: r.fake.URL()})
	require.NoError(t, err)
	_, err = sandbox.New(ctx, t.TempDir(), sandbox.Options{Payments: cl.Backend})
	require.Error(t, err)
	require.NotContains(t, err.Error(), bad)
	require.Contains(t, err.Error(), "401")

	require.Contains(t, r.logs.String(), "stripe refund refused", "the logs were captured")
	for _, k := range []string{secretKey, bad} {
		require.NotContains(t, r.logs.String(), k)
		require.NotContains(t, r.bodys.String(), k)
	}
	files := 0
	require.NoError(t, filepath.WalkDir(r.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		require.NotContains(t, string(b), secretKey, path)
		return nil
	}))
	require.Positive(t, files)
}
