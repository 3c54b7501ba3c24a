package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v79"

	"github.com/commitlayer/commitlayer"
	stripeconn "github.com/commitlayer/commitlayer/connectors/stripe"
	"github.com/commitlayer/commitlayer/internal/stripeapi"
	"github.com/commitlayer/commitlayer/sandbox/stripefake"
)

var ctx = context.Background()

const readKey = "rk_test_ConnectorReadOnly0123456789"

func TestCheckKey(t *testing.T) {
	tests := []struct {
		key string
		err error
	}{
		{"rk_test_abc123DEF456", nil},
		{"rk_live_abc123DEF456", nil},
		{"sk_test_abc123DEF456", nil},
		{"sk_live_abc123DEF456", stripeconn.ErrLiveSecretKey},
		{"pk_test_abc123DEF456", stripeconn.ErrBadKey},
		{"rk_test_", stripeconn.ErrBadKey},
		{"", stripeconn.ErrBadKey},
		{"rk_test_abc 123", stripeconn.ErrBadKey},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			err := stripeconn.CheckKey(tc.key)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
			if len(tc.key) > 8 {
				require.NotContains(t, err.Error(), tc.key)
			}
		})
	}
	// A live secret key is refused before any call.
	f := stripefake.Start(stripefake.Options{})
	defer f.Close()
	c := &stripeconn.Client{BaseURL: f.URL(), Key: "sk_live_abc123DEF456"}
	_, err := c.Pull(ctx, "stripe", "", 0)
	require.ErrorIs(t, err, stripeconn.ErrLiveSecretKey)
	require.Contains(t, err.Error(), "restricted key")
	require.Empty(t, f.Requests())
}

// account is a fake Stripe with a writer client and a controllable clock.
type account struct {
	f   *stripefake.Fake
	mu  sync.Mutex
	now time.Time
}

func newAccount(t *testing.T) *account {
	a := &account{now: time.Unix(1_800_000_000, 0)}
	a.f = stripefake.Start(stripefake.Options{Now: func() time.Time {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.now
	}})
	t.Cleanup(a.f.Close)
	return a
}

func (a *account) tick(d time.Duration) {
	a.mu.Lock()
	a.now = a.now.Add(d)
	a.mu.Unlock()
}

func (a *account) pi(t *testing.T, amount int64, order string) string {
	t.Helper()
	sc, err := stripeapi.New(stripeapi.Config{Key: stripefake.TestKey, BaseURL: a.f.URL()})
	require.NoError(t, err)
	p := &stripego.PaymentIntentParams{Amount: stripego.Int64(amount), Currency: stripego.String("usd"),
		PaymentMethod: stripego.String("pm_card_visa"), PaymentMethodTypes: stripego.StringSlice([]string{"card"}), Confirm: stripego.Bool(true)}
	p.AddMetadata("order_id", order)
	pi, err := sc.PaymentIntents.New(p)
	require.NoError(t, err)
	return pi.ID
}

func (a *account) refund(t *testing.T, pi string, amount int64) string {
	t.Helper()
	id, err := a.f.RefundOutside(pi, amount)
	require.NoError(t, err)
	return id
}

func (a *account) client() *stripeconn.Client {
	return &stripeconn.Client{BaseURL: a.f.URL(), Key: readKey, Sleep: func(context.Context, time.Duration) error { return nil }}
}

// pullAll pulls page by page from cur until no sweep has pages left.
func (a *account) pullAll(t *testing.T, cur string) commitlayer.FactPage {
	t.Helper()
	all := commitlayer.FactPage{Next: cur}
	for range 100 {
		p, err := a.client().Pull(ctx, "stripe", all.Next, 0)
		require.NoError(t, err)
		all.Facts = append(all.Facts, p.Facts...)
		all.Next, all.More = p.Next, p.More
		if !p.More {
			return all
		}
	}
	t.Fatal("still more after 100 pages")
	return all
}

func ids(facts []commitlayer.Fact) []string {
	out := make([]string, 0, len(facts))
	for _, f := range facts {
		out = append(out, f.ExternalID)
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

func TestPullEverythingOnceAcrossPagesAndRestarts(t *testing.T) {
	a := newAccount(t)
	var want []string
	var pis []string
	for i := range 5 {
		pi := a.pi(t, 10_000, "o_"+string(rune('a'+i)))
		pis = append(pis, pi)
		a.tick(time.Second)
	}
	for i, pi := range pis[:3] {
		want = append(want, a.refund(t, pi, 1000))
		if i < 2 {
			a.tick(time.Second) // the last refund shares its second with what follows
		}
	}
	want = append(want, a.f.AddPayout(5000, "usd", "paid"))
	dp, err := a.f.AddDispute(pis[4], "fraudulent")
	require.NoError(t, err)
	want = append(want, dp)

	cursor := ""
	var got []commitlayer.Fact
	pulls := 0
	for {
		// A new client per pull: only the cursor string carries over.
		p, err := a.client().Pull(ctx, "stripe", cursor, 2)
		require.NoError(t, err)
		require.NoError(t, stripeconn.ParseCursor(p.Next))
		got = append(got, p.Facts...)
		cursor = p.Next
		pulls++
		if !p.More {
			break
		}
		require.Less(t, pulls, 10)
	}
	require.Equal(t, 3, pulls, "5 charges in pages of 2")
	charges := 0
	for _, f := range got {
		if f.Type == "charge_captured" {
			charges++
			want = append(want, f.ExternalID)
		}
	}
	require.Equal(t, 5, charges)
	require.Equal(t, sorted(want...), ids(got), "every object exactly once")

	// Nothing new: nothing read.
	p, err := a.client().Pull(ctx, "stripe", cursor, 2)
	require.NoError(t, err)
	require.Empty(t, p.Facts)
	require.False(t, p.More)
	cursor = p.Next

	// New objects in the same second as the watermark and after it.
	same := a.refund(t, pis[3], 500)
	a.tick(time.Second)
	later := a.refund(t, pis[3], 600)
	po := a.f.AddPayout(10, "usd", "in_transit")
	all := a.pullAll(t, cursor)
	require.Equal(t, sorted(same, later, po), ids(all.Facts))
	all = a.pullAll(t, all.Next)
	require.Empty(t, all.Facts)
}

func TestFacts(t *testing.T) {
	a := newAccount(t)
	pi := a.pi(t, 12_000, "o_1001")
	sc, err := stripeapi.New(stripeapi.Config{Key: stripefake.TestKey, BaseURL: a.f.URL()})
	require.NoError(t, err)
	rp := &stripego.RefundParams{PaymentIntent: stripego.String(pi), Amount: stripego.Int64(2500), Reason: stripego.String("requested_by_customer")}
	rp.AddMetadata("order_id", "o_1001")
	rf, err := sc.Refunds.New(rp)
	require.NoError(t, err)
	dp, err := a.f.AddDispute(pi, "fraudulent")
	require.NoError(t, err)
	po := a.f.AddPayout(700, "usd", "paid")

	p := a.pullAll(t, "")
	byID := map[string]commitlayer.Fact{}
	for _, f := range p.Facts {
		byID[f.ExternalID] = f
	}
	r := byID[rf.ID]
	require.Equal(t, "refund_created", r.Type)
	require.Equal(t, commitlayer.Subject("order:o_1001"), r.Subject)
	require.Equal(t, "stripe", r.Source)
	require.Equal(t, int64(2500), r.Attrs["amount"])
	require.Equal(t, "USD", r.Attrs["currency"])
	require.Equal(t, "succeeded", r.Attrs["status"])
	require.Equal(t, "requested_by_customer", r.Attrs["reason"])
	require.Contains(t, r.Links, commitlayer.Subject("payment_intent:"+pi))
	require.Equal(t, time.Unix(1_800_000_000, 0).UTC(), r.OccurredAt)

	ch := byID[rf.Charge.ID]
	require.Equal(t, "charge_captured", ch.Type)
	require.Equal(t, commitlayer.Subject("order:o_1001"), ch.Subject, "the charge carries the PaymentIntent's metadata")
	require.Equal(t, int64(2500), ch.Attrs["amount_refunded"])
	require.Equal(t, true, ch.Attrs["disputed"])

	d := byID[dp]
	require.Equal(t, "dispute_created", d.Type)
	require.Equal(t, commitlayer.Subject("payment_intent:"+pi), d.Subject)
	require.Equal(t, "fraudulent", d.Attrs["reason"])

	pf := byID[po]
	require.Equal(t, "payout_paid", pf.Type)
	require.Equal(t, commitlayer.Subject("payout:"+po), pf.Subject)
	require.Len(t, p.Facts, 4)
	for _, f := range p.Facts {
		require.NoError(t, f.Validate())
	}
}

func TestErrorsAndBackoff(t *testing.T) {
	tests := []struct {
		name     string
		failures []int // statuses answered before success, to GET /v1/refunds
		attempts int
		err      error
		sleeps   []time.Duration
	}{
		{"429 then 500 then fine", []int{429, 500}, 0, nil, []time.Duration{500 * time.Millisecond, time.Second}},
		{"rate limited throughout", []int{429, 429, 429, 429}, 0, stripeconn.ErrRateLimited,
			[]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}},
		{"5xx throughout, 2 attempts", []int{503, 503}, 2, stripeconn.ErrUnreachable, []time.Duration{500 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccount(t)
			for _, s := range tc.failures {
				a.f.FailNext(http.MethodGet, "/v1/refunds", s, 1)
			}
			var sleeps []time.Duration
			c := a.client()
			c.MaxAttempts = tc.attempts
			c.Sleep = func(_ context.Context, d time.Duration) error {
				sleeps = append(sleeps, d)
				return nil
			}
			p, err := c.Pull(ctx, "stripe", "", 0)
			require.Equal(t, tc.sleeps, sleeps)
			if tc.err == nil {
				require.NoError(t, err)
				require.NotEmpty(t, p.Next)
				return
			}
			require.ErrorIs(t, err, tc.err)
			require.True(t, errors.Is(err, stripeconn.ErrRateLimited) || errors.Is(err, stripeconn.ErrUnreachable), "may clear by itself")
			require.Contains(t, err.Error(), "list refunds")
		})
	}

	t.Run("refused key: no retry", func(t *testing.T) {
		f := stripefake.Start(stripefake.Options{Keys: []string{"rk_test_other000000000"}})
		defer f.Close()
		slept := false
		c := &stripeconn.Client{BaseURL: f.URL(), Key: readKey, Sleep: func(context.Context, time.Duration) error { slept = true; return nil }}
		_, err := c.Pull(ctx, "stripe", "", 0)
		require.ErrorIs(t, err, stripeconn.ErrUnauthorized)
		require.NotErrorIs(t, err, stripeconn.ErrRateLimited)
		require.NotErrorIs(t, err, stripeconn.ErrUnreachable)
		require.False(t, slept)
		require.NotContains(t, err.Error(), readKey)
		require.Len(t, f.Requests(), 0, "refused before the handler records it")
	})

	t.Run("unreachable", func(t *testing.T) {
		f := stripefake.Start(stripefake.Options{})
		url := f.URL()
		f.Close()
		c := &stripeconn.Client{BaseURL: url, Key: readKey, MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }}
		_, err := c.Pull(ctx, "stripe", "", 0)
		require.ErrorIs(t, err, stripeconn.ErrUnreachable)
	})

	t.Run("bad cursor and source", func(t *testing.T) {
		a := newAccount(t)
		for _, cur := range []string{"12", `{"v":2}`, `{"v":1,"res":{"invoices":{}}}`, `{"v":1,"x":1}`} {
			_, err := a.client().Pull(ctx, "stripe", cur, 0)
			require.ErrorIs(t, err, stripeconn.ErrBadResponse, cur)
		}
		_, err := a.client().Pull(ctx, "bad source!", "", 0)
		require.Error(t, err)
		require.Empty(t, a.f.Requests())
	})
}
