package stripefake_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/commitlayer/commitlayer/internal/stripeapi"
	"github.com/commitlayer/commitlayer/sandbox/stripefake"
)

func start(t *testing.T) (*stripefake.Fake, *client.API) {
	t.Helper()
	f := stripefake.Start(stripefake.Options{})
	t.Cleanup(f.Close)
	sc, err := stripeapi.New(stripeapi.Config{Key: stripefake.TestKey, BaseURL: f.URL()})
	require.NoError(t, err)
	return f, sc
}

func confirmedPI(t *testing.T, sc *client.API, amount int64, order string) *stripe.PaymentIntent {
	t.Helper()
	p := &stripe.PaymentIntentParams{
		Amount: stripe.Int64(amount), Currency: stripe.String("usd"), PaymentMethod: stripe.String("pm_card_visa"),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}), Confirm: stripe.Bool(true),
	}
	p.AddMetadata("order_id", order)
	pi, err := sc.PaymentIntents.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
	require.NotNil(t, pi.LatestCharge)
	require.Equal(t, order, pi.Metadata["order_id"])
	return pi
}

func stripeErr(t *testing.T, err error) *stripe.Error {
	t.Helper()
	require.Error(t, err)
	se := stripeapi.AsError(err)
	require.NotNil(t, se, "not a *stripe.Error: %v", err)
	return se
}

func TestPaymentIntentCreateThenConfirm(t *testing.T) {
	_, sc := start(t)
	pi, err := sc.PaymentIntents.New(&stripe.PaymentIntentParams{Amount: stripe.Int64(500), Currency: stripe.String("usd"),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"})})
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, pi.Status)
	pi, err = sc.PaymentIntents.Confirm(pi.ID, &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String("pm_card_visa")})
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
	_, err = sc.PaymentIntents.Confirm(pi.ID, nil)
	require.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, stripeErr(t, err).Code)
	got, err := sc.PaymentIntents.Get(pi.ID, nil)
	require.NoError(t, err)
	require.Equal(t, int64(500), got.AmountReceived)
}

func TestRefundRules(t *testing.T) {
	_, sc := start(t)
	pi := confirmedPI(t, sc, 12000, "o_1")
	refund := func(amount int64) (*stripe.Refund, error) {
		p := &stripe.RefundParams{PaymentIntent: stripe.String(pi.ID)}
		if amount > 0 {
			p.Amount = stripe.Int64(amount)
		}
		return sc.Refunds.New(p)
	}
	r1, err := refund(2000)
	require.NoError(t, err)
	require.Equal(t, int64(2000), r1.Amount)
	require.Equal(t, stripe.RefundStatusSucceeded, r1.Status)
	require.Equal(t, pi.LatestCharge.ID, r1.Charge.ID)
	require.True(t, strings.HasPrefix(r1.ID, "re_"))

	_, err = refund(10001)
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, se.Code)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)

	r2, err := refund(0) // the rest
	require.NoError(t, err)
	require.Equal(t, int64(10000), r2.Amount)

	_, err = refund(0)
	se = stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeChargeAlreadyRefunded, se.Code)

	ch, err := sc.Charges.Get(pi.LatestCharge.ID, nil)
	require.NoError(t, err)
	require.Equal(t, int64(12000), ch.AmountRefunded)
	it := sc.Charges.List(&stripe.ChargeListParams{PaymentIntent: stripe.String(pi.ID)})
	require.True(t, it.Next())
	require.Equal(t, int64(12000), it.Charge().AmountRefunded)
	require.True(t, it.Charge().Refunded)
	require.NoError(t, it.Err())

	got, err := sc.Refunds.Get(r1.ID, nil)
	require.NoError(t, err)
	require.Equal(t, r1.ID, got.ID)
	_, err = sc.Refunds.Get("re_missing", nil)
	se = stripeErr(t, err)
	require.Equal(t, http.StatusNotFound, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)
}

func TestRefundValidation(t *testing.T) {
	_, sc := start(t)
	pi := confirmedPI(t, sc, 1000, "o_1")
	unconfirmed, err := sc.PaymentIntents.New(&stripe.PaymentIntentParams{Amount: stripe.Int64(500), Currency: stripe.String("usd")})
	require.NoError(t, err)
	tests := []struct {
		name   string
		params *stripe.RefundParams
		status int
		code   stripe.ErrorCode
		param  string
	}{
		{"no target", &stripe.RefundParams{Amount: stripe.Int64(1)}, 400, stripe.ErrorCodeParameterMissing, ""},
		{"unknown PaymentIntent", &stripe.RefundParams{PaymentIntent: stripe.String("pi_nope")}, 404, stripe.ErrorCodeResourceMissing, "payment_intent"},
		{"bad reason", &stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Reason: stripe.String("because")}, 400, "", "reason"},
		{"zero amount", &stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(0)}, 400, stripe.ErrorCodeParameterInvalidInteger, "amount"},
		{"no successful charge", &stripe.RefundParams{PaymentIntent: stripe.String(unconfirmed.ID)}, 400, "charge_not_refundable", "payment_intent"},
		{"unknown parameter", &stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Origin: stripe.String("x")}, 400, stripe.ErrorCodeParameterUnknown, "origin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sc.Refunds.New(tc.params)
			se := stripeErr(t, err)
			require.Equal(t, tc.status, se.HTTPStatusCode)
			require.Equal(t, tc.code, se.Code)
			require.Equal(t, tc.param, se.Param)
			require.NotEmpty(t, se.Msg)
		})
	}
}

func TestIdempotency(t *testing.T) {
	f, sc := start(t)
	pi := confirmedPI(t, sc, 5000, "o_1")
	params := func(amount int64, key string) *stripe.RefundParams {
		p := &stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(amount)}
		p.SetIdempotencyKey(key)
		return p
	}
	r1, err := sc.Refunds.New(params(1000, "k1"))
	require.NoError(t, err)
	require.Empty(t, r1.LastResponse.Header.Get("Idempotent-Replayed"))
	r2, err := sc.Refunds.New(params(1000, "k1"))
	require.NoError(t, err)
	require.Equal(t, "true", r2.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, r1.ID, r2.ID)
	require.Equal(t, string(r1.LastResponse.RawJSON), string(r2.LastResponse.RawJSON))
	require.Len(t, f.Refunds(), 1)

	_, err = sc.Refunds.New(params(1500, "k1"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)

	// A refusal that Stripe executed is saved too: after the charge is
	// spent, the replay of a refused key is the same refusal.
	_, err = sc.Refunds.New(params(4001, "k2"))
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, stripeErr(t, err).Code)
	_, err = sc.Refunds.New(params(4001, "k2"))
	se = stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, se.Code)
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))

	// A validation refusal is not saved: the same key may be corrected.
	bad := params(1, "k3")
	bad.Reason = stripe.String("nope")
	_, err = sc.Refunds.New(bad)
	require.Equal(t, "reason", stripeErr(t, err).Param)
	_, err = sc.Refunds.New(params(1, "k3"))
	require.NoError(t, err)

	// Without a key (stripped from stripe-go's generated one) a retry is
	// a new refund.
	for range 2 {
		p := &stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(100)}
		p.Context = stripeapi.WithoutIdempotencyKey(context.Background())
		_, err := sc.Refunds.New(p)
		require.NoError(t, err)
	}
	reqs := f.Requests()
	require.Empty(t, reqs[len(reqs)-1].IdempotencyKey)
	require.Empty(t, reqs[len(reqs)-2].IdempotencyKey)
	require.Len(t, f.Refunds(), 4)
	// stripe-go's generated key is kept on an ordinary POST.
	require.NotEmpty(t, reqs[0].IdempotencyKey)
}

func TestListFilterAndPagination(t *testing.T) {
	f, sc := start(t)
	a := confirmedPI(t, sc, 10000, "o_a")
	b := confirmedPI(t, sc, 10000, "o_b")
	var ids []string
	for i := range 5 {
		pi := a
		if i%2 == 1 {
			pi = b
		}
		r, err := sc.Refunds.New(&stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(100)})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	// Filtered by PaymentIntent, auto-paginated by stripe-go with limit 1.
	lp := &stripe.RefundListParams{PaymentIntent: stripe.String(a.ID)}
	lp.Limit = stripe.Int64(1)
	it := sc.Refunds.List(lp)
	var got []string
	for it.Next() {
		got = append(got, it.Refund().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{ids[4], ids[2], ids[0]}, got) // newest first

	// One page at a time: has_more and starting_after.
	lp = &stripe.RefundListParams{}
	lp.Limit = stripe.Int64(2)
	lp.Single = true
	it = sc.Refunds.List(lp)
	got = nil
	for it.Next() {
		got = append(got, it.Refund().ID)
	}
	require.Equal(t, []string{ids[4], ids[3]}, got)
	require.True(t, it.Meta().HasMore)
	lp.StartingAfter = stripe.String(ids[3])
	it = sc.Refunds.List(lp)
	got = nil
	for it.Next() {
		got = append(got, it.Refund().ID)
	}
	require.Equal(t, []string{ids[2], ids[1]}, got)
	require.True(t, it.Meta().HasMore)
	lp.StartingAfter = stripe.String(ids[1])
	it = sc.Refunds.List(lp)
	got = nil
	for it.Next() {
		got = append(got, it.Refund().ID)
	}
	require.Equal(t, []string{ids[0]}, got)
	require.False(t, it.Meta().HasMore)

	// Raw wire: the list envelope.
	req, _ := http.NewRequest(http.MethodGet, f.URL()+"/v1/refunds?limit=101", nil)
	req.Header.Set("Authorization", "Bearer "+stripefake.TestKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	var eb struct {
		Error map[string]any `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&eb))
	require.Equal(t, "invalid_request_error", eb.Error["type"])
	require.Equal(t, "limit", eb.Error["param"])
}

func TestCreatedFilterPayoutsDisputes(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := stripefake.Start(stripefake.Options{Now: func() time.Time { return now }})
	t.Cleanup(f.Close)
	sc, err := stripeapi.New(stripeapi.Config{Key: stripefake.TestKey, BaseURL: f.URL()})
	require.NoError(t, err)
	old := f.AddPayout(500, "USD", "paid")
	now = now.Add(time.Hour)
	recent := f.AddPayout(700, "usd", "in_transit")
	lp := &stripe.PayoutListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: now.Unix()}}
	it := sc.Payouts.List(lp)
	var got []string
	for it.Next() {
		got = append(got, it.Payout().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{recent}, got)
	require.NotEqual(t, old, recent)

	pi := confirmedPI(t, sc, 3000, "o_d")
	dp, err := f.AddDispute(pi.ID, "fraudulent")
	require.NoError(t, err)
	dit := sc.Disputes.List(&stripe.DisputeListParams{PaymentIntent: stripe.String(pi.ID)})
	require.True(t, dit.Next())
	require.Equal(t, dp, dit.Dispute().ID)
	require.Equal(t, int64(3000), dit.Dispute().Amount)
	require.Equal(t, pi.LatestCharge.ID, dit.Dispute().Charge.ID)
	_, err = f.AddDispute("pi_nope", "fraudulent")
	require.Error(t, err)
}

func TestKeys(t *testing.T) {
	f := stripefake.Start(stripefake.Options{Keys: []string{stripefake.TestKey, "rk_test_readonly12345678"}})
	t.Cleanup(f.Close)
	tests := []struct {
		name   string
		key    string
		status int
	}{
		{"malformed", "sk_test_", 401},
		{"not a stripe key", "hello-world-123456", 401},
		{"well formed but unknown", "sk_test_0000000000000000", 401},
		{"restricted key writes", "rk_test_readonly12345678", 403},
		{"accepted", stripefake.TestKey, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := stripeapi.New(stripeapi.Config{Key: tc.key, BaseURL: f.URL()})
			require.NoError(t, err)
			_, err = sc.PaymentIntents.New(&stripe.PaymentIntentParams{Amount: stripe.Int64(100), Currency: stripe.String("usd")})
			if tc.status == 200 {
				require.NoError(t, err)
				return
			}
			se := stripeErr(t, err)
			require.Equal(t, tc.status, se.HTTPStatusCode)
			require.NotContains(t, stripeapi.Describe(err), tc.key)
		})
	}
	// The restricted key may read.
	sc, err := stripeapi.New(stripeapi.Config{Key: "rk_test_readonly12345678", BaseURL: f.URL()})
	require.NoError(t, err)
	it := sc.Refunds.List(&stripe.RefundListParams{})
	for it.Next() {
	}
	require.NoError(t, it.Err())

	// No key at all.
	resp, err := http.Get(f.URL() + "/v1/refunds")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, string(b), "did not provide an API key")
}

func TestFailNextAndUnknownRoute(t *testing.T) {
	f, sc := start(t)
	f.FailNext(http.MethodGet, "/v1/refunds", http.StatusTooManyRequests, 1)
	f.FailNext(http.MethodGet, "/v1/refunds", http.StatusInternalServerError, 1)
	it := sc.Refunds.List(&stripe.RefundListParams{})
	require.False(t, it.Next())
	require.Equal(t, http.StatusTooManyRequests, stripeErr(t, it.Err()).HTTPStatusCode)
	it = sc.Refunds.List(&stripe.RefundListParams{})
	require.False(t, it.Next())
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, it.Err()).HTTPStatusCode)
	it = sc.Refunds.List(&stripe.RefundListParams{})
	require.False(t, it.Next())
	require.NoError(t, it.Err())

	req, _ := http.NewRequest(http.MethodGet, f.URL()+"/v1/nothing?"+url.Values{"a": {"b"}}.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+stripefake.TestKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestRefundOutside(t *testing.T) {
	f, sc := start(t)
	pi := confirmedPI(t, sc, 800, "o_x")
	id, err := f.RefundOutside(pi.ID, 0)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(id, "re_"))
	_, err = f.RefundOutside(pi.ID, 0)
	require.ErrorContains(t, err, "charge_already_refunded")
}
