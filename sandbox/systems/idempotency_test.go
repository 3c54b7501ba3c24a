package systems_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// writeRoute is a write that succeeds on the default seed, with another body
// for the same route.
type writeRoute struct {
	system, path, body, other string
	setup                     func(t *testing.T, op *sandbox.Operator)
}

var writeRoutes = []writeRoute{
	{system: "payments", path: "/payments/refunds",
		body:  `{"order_id":"o_1001","amount":2500,"currency":"USD"}`,
		other: `{"order_id":"o_1001","amount":2600,"currency":"USD"}`},
	{system: "payments", path: "/payments/billing/stop", body: `{"subscription_id":"sub_1"}`, other: `{"subscription_id":"sub_2"}`},
	{system: "payments", path: "/payments/refunds/re_1/reverse", body: ``, other: ``, setup: func(t *testing.T, op *sandbox.Operator) {
		must[systems.Refund](t)(op.Refund(ctx, "o_1001", 100, "USD", ""))
	}},
	{system: "orders", path: "/orders/orders/o_1001/status", body: `{"status":"refunded"}`, other: `{"status":"cancelled"}`},
	{system: "orders", path: "/orders/orders/o_1002/address", body: `{"address":"7 Harbor Road"}`, other: `{"address":"8 Harbor Road"}`},
	{system: "orders", path: "/orders/orders/o_1003/discounts", body: `{"percent":10}`, other: `{"percent":20}`},
	{system: "crm", path: "/crm/subscriptions/sub_1/cancel", body: `{"reason":"asked"}`, other: `{"reason":"moved"}`},
	{system: "crm", path: "/crm/customers/c_1/status", body: `{"status":"frozen"}`, other: `{"status":"active"}`},
	{system: "tickets", path: "/tickets/tickets/t_1/notes", body: `{"body":"Refunded."}`, other: `{"body":"Refunded!"}`},
	{system: "tickets", path: "/tickets/tickets/t_1/close", body: `{"resolution":"done"}`, other: `{"resolution":"fixed"}`},
	{system: "ledger", path: "/ledger/payouts", body: `{"account_id":"acc_1","amount":5000,"currency":"USD"}`,
		other: `{"account_id":"acc_1","amount":5001,"currency":"USD"}`},
	{system: "ledger", path: "/ledger/payouts/po_1/return", body: `{"reason":"closed"}`, other: `{"reason":"other"}`, setup: func(t *testing.T, op *sandbox.Operator) {
		must[systems.Payout](t)(op.SendPayout(ctx, "acc_1", 100, "USD"))
	}},
	{system: "ledger", path: "/ledger/accounts/acc_1/status", body: `{"status":"frozen"}`, other: `{"status":"active"}`},
	{system: "platform", path: "/platform/services/svc_api/deploy", body: `{"version":"2.0.0","environment":"production"}`,
		other: `{"version":"2.0.0","environment":"staging"}`},
	{system: "platform", path: "/platform/deployments/dep_1/rollback", body: `{}`, other: ``, setup: func(t *testing.T, op *sandbox.Operator) {
		must[systems.Deployment](t)(op.Deploy(ctx, "svc_api", "2.0.0", "production"))
	}},
	{system: "platform", path: "/platform/services/svc_api/status", body: `{"status":"degraded"}`, other: `{"status":"healthy"}`},
	{system: "broker", path: "/broker/orders", body: `{"product_id":"p_acme","account_id":"acc_1","side":"buy","quantity":2,"limit_price":16000}`,
		other: `{"product_id":"p_acme","account_id":"acc_1","side":"buy","quantity":3,"limit_price":16000}`},
	{system: "broker", path: "/broker/fills/f_1/bust", body: `{"reason":"error"}`, other: `{"reason":"other"}`, setup: func(t *testing.T, op *sandbox.Operator) {
		must[systems.BrokerOrder](t)(op.PlaceOrder(ctx, tradeReq))
	}},
	{system: "broker", path: "/broker/products/p_acme/status", body: `{"status":"halted"}`, other: `{"status":"trading"}`},
	{system: "broker", path: "/broker/products/p_acme/price", body: `{"price":17000}`, other: `{"price":18000}`},
}

// otherRoute is, per system, another write that succeeds on the default seed.
var otherRoute = map[string][2]string{
	"payments": {"/payments/billing/stop", `{"subscription_id":"sub_4"}`},
	"orders":   {"/orders/orders/o_1004/status", `{"status":"cancelled"}`},
	"crm":      {"/crm/subscriptions/sub_4/cancel", `{}`},
	"tickets":  {"/tickets/tickets/t_6/notes", `{"body":"x"}`},
	"ledger":   {"/ledger/accounts/acc_4/status", `{"status":"frozen"}`},
	"platform": {"/platform/services/svc_web/status", `{"status":"degraded"}`},
	"broker":   {"/broker/products/p_globex/status", `{"status":"halted"}`},
}

// TestIdempotency checks every write route: a replay with the same key
// answers the stored response and changes nothing; the same key with another
// body, or on another route, is 409 and changes nothing; whitespace and key
// order in the body do not make another request.
func TestIdempotency(t *testing.T) {
	for _, wr := range writeRoutes {
		t.Run(wr.path, func(t *testing.T) {
			e := newEnterprise(t)
			if wr.setup != nil {
				wr.setup(t, e.Operator())
			}
			before := counts(t, e)
			first := call(t, e, "POST", wr.path, wr.body, "key-1")
			require.Equal(t, http.StatusOK, first.status, "%s", first.body)
			require.False(t, first.replayed)
			effects := eventsAfter(t, e, wr.system, before[wr.system])
			require.NotEmpty(t, effects, "the first call has an effect")
			clock := e.Clock().Now()

			again := call(t, e, "POST", wr.path, wr.body, "key-1")
			require.Equal(t, first.status, again.status)
			require.Equal(t, string(first.body), string(again.body))
			require.True(t, again.replayed)

			if strings.HasPrefix(wr.body, "{") && len(wr.body) > 2 {
				spaced := " " + strings.ReplaceAll(wr.body, ",", " , ") + "\n"
				r := call(t, e, "POST", wr.path, spaced, "key-1")
				require.Equal(t, string(first.body), string(r.body), "same request, other whitespace")
			}

			if wr.other != "" { // routes without a body have no other body
				other := call(t, e, "POST", wr.path, wr.other, "key-1")
				require.Equal(t, http.StatusConflict, other.status, "%s", other.body)
				require.Equal(t, "idempotency_key_reused", other.errCode(t))
			}
			alt := otherRoute[wr.system]
			sameSystem := call(t, e, "POST", alt[0], alt[1], "key-1")
			require.Equal(t, http.StatusConflict, sameSystem.status, "same key, other route: %s", sameSystem.body)
			require.Equal(t, "idempotency_key_reused", sameSystem.errCode(t))

			require.Len(t, eventsAfter(t, e, wr.system, before[wr.system]), len(effects), "one effect only")
			require.Equal(t, clock, e.Clock().Now(), "replays and conflicts do not tick")

			otherSystem := "crm"
			if wr.system == "crm" {
				otherSystem = "orders"
			}
			alt = otherRoute[otherSystem]
			elsewhere := call(t, e, "POST", alt[0], alt[1], "key-1")
			require.Equal(t, http.StatusOK, elsewhere.status, "keys are per system: %s", elsewhere.body)

			// Without a key, the same request is a new request.
			if wr.path == "/payments/refunds" || wr.path == "/ledger/payouts" || wr.path == "/broker/orders" ||
				strings.HasSuffix(wr.path, "/notes") || strings.HasSuffix(wr.path, "/discounts") || strings.HasSuffix(wr.path, "/deploy") {
				r := call(t, e, "POST", wr.path, wr.body, "")
				require.Equal(t, http.StatusOK, r.status)
				require.NotEqual(t, string(first.body), string(r.body), "a second effect with a new id")
				require.Len(t, eventsAfter(t, e, wr.system, before[wr.system]), 2*len(effects))
			}
		})
	}
}

// TestIdempotencyStoresRefusals: a business refusal is the result of the
// request and is replayed as such, even after the state changed; bad input
// is not stored, so the caller can correct it under the same key.
func TestIdempotencyStoresRefusals(t *testing.T) {
	e := newEnterprise(t)
	tooMuch := `{"order_id":"o_1001","amount":99999,"currency":"USD"}`
	r := call(t, e, "POST", "/payments/refunds", tooMuch, "k")
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "amount_too_large", r.errCode(t))
	r2 := call(t, e, "POST", "/payments/refunds", tooMuch, "k")
	require.Equal(t, string(r.body), string(r2.body))
	require.True(t, r2.replayed)
	require.Equal(t, http.StatusConflict, call(t, e, "POST", "/payments/refunds", `{"order_id":"o_1001","amount":1,"currency":"USD"}`, "k").status)

	// A frozen account: refused, stored, and replayed after unfreezing.
	payout := `{"account_id":"acc_3","amount":100,"currency":"USD"}`
	require.Equal(t, http.StatusForbidden, call(t, e, "POST", "/ledger/payouts", payout, "p").status)
	must[systems.Account](t)(e.Operator().SetAccountStatus(ctx, "acc_3", "active"))
	again := call(t, e, "POST", "/ledger/payouts", payout, "p")
	require.Equal(t, http.StatusForbidden, again.status)
	require.True(t, again.replayed)
	require.Equal(t, http.StatusOK, call(t, e, "POST", "/ledger/payouts", payout, "p2").status)

	// 400 is not stored: the corrected request under the same key goes through.
	require.Equal(t, http.StatusBadRequest, call(t, e, "POST", "/payments/refunds", `{"order_id":"o_1002","amount":0,"currency":"USD"}`, "b").status)
	ok := call(t, e, "POST", "/payments/refunds", `{"order_id":"o_1002","amount":10,"currency":"USD"}`, "b")
	require.Equal(t, http.StatusOK, ok.status, "%s", ok.body)

	// A key that is too long is bad input.
	require.Equal(t, http.StatusBadRequest, call(t, e, "POST", "/payments/refunds", tooMuch, strings.Repeat("k", 256)).status)

	// The stored keys are in the file for the oracle.
	db, err := sql.Open("sqlite", "file:"+e.DBPath("payments")+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM idempotency_keys`).Scan(&n))
	require.Equal(t, 2, n, "k and b")
}

var tradeReq = systems.TradeRequest{ProductID: "p_acme", AccountID: "acc_1", Side: "buy", Quantity: 2, LimitPrice: 16000}

// TestConcurrentWrites: many clients at once, on one system, with distinct
// keys and with one shared key: every distinct key has one effect, the
// shared key one effect in all, and event seqs stay gapless.
func TestConcurrentWrites(t *testing.T) {
	e := newEnterprise(t)
	before := len(feed(t, e, "tickets"))
	var wg sync.WaitGroup
	bodies := make([]string, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k-%d", i)
			if i%2 == 0 {
				key = "shared"
			}
			r := call(t, e, "POST", "/tickets/tickets/t_1/notes", `{"body":"note"}`, key)
			require.Equal(t, http.StatusOK, r.status)
			bodies[i] = string(r.body)
		}()
	}
	wg.Wait()
	evs := eventsAfter(t, e, "tickets", before)
	require.Len(t, evs, 21, "20 distinct keys and one shared")
	for i := 2; i < 40; i += 2 {
		require.Equal(t, bodies[0], bodies[i], "every holder of the shared key sees the same note")
	}
	all := feed(t, e, "tickets")
	for i, ev := range all {
		require.Equal(t, int64(i+1), ev.Seq)
		require.Equal(t, fmt.Sprintf("tickets-%d", i+1), ev.ID)
	}
}
