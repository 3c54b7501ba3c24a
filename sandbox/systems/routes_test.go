package systems_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// routeCase is one request against a fresh default enterprise.
type routeCase struct {
	name               string
	setup              func(t *testing.T, op *sandbox.Operator)
	method, path, body string
	status             int
	code               string              // the error code, when status is not 200
	events             map[string][]string // system → types of the events the request appends
	check              func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event)
}

// runRoutes runs each case on its own enterprise and checks, beyond the
// case's own expectations, that a request appends exactly the events listed
// (refusals append none) and that a write with events advances the clock by
// exactly one second and stamps its events with it, while a request without
// events leaves the clock alone.
func runRoutes(t *testing.T, cases []routeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnterprise(t)
			if tc.setup != nil {
				tc.setup(t, e.Operator())
			}
			before := counts(t, e)
			clockBefore := e.Clock().Now()
			r := call(t, e, tc.method, tc.path, tc.body, "")
			require.Equal(t, tc.status, r.status, "body: %s", r.body)
			if tc.status != http.StatusOK {
				require.Equal(t, tc.code, r.errCode(t))
			}
			appended := map[string][]systems.Event{}
			total := 0
			for _, s := range sandbox.Systems {
				evs := eventsAfter(t, e, s, before[s])
				want := tc.events[s]
				if want == nil {
					want = []string{}
				}
				require.Equal(t, want, types(evs), "events appended to %s", s)
				appended[s] = evs
				total += len(evs)
			}
			if total == 0 {
				require.Equal(t, clockBefore, e.Clock().Now(), "no event, no tick")
			} else {
				require.Equal(t, clockBefore.Add(time.Second), e.Clock().Now(), "one write, one second")
				for _, evs := range appended {
					for _, ev := range evs {
						require.Equal(t, e.Clock().Last().Format(time.RFC3339), ev.OccurredAt)
					}
				}
			}
			if tc.check != nil {
				tc.check(t, e, r, appended)
			}
		})
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

var ctx = context.Background()

func ev(system, typ string) map[string][]string { return map[string][]string{system: {typ}} }

// readJSON GETs path and decodes the answer into a map.
func readJSON(t *testing.T, e *sandbox.Enterprise, path string) map[string]any {
	t.Helper()
	r := call(t, e, "GET", path, "", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	return r.json(t)
}

func num(n int64) json.Number { return json.Number(itoa(n)) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestPaymentsRoutes(t *testing.T) {
	refund := func(order string, amount int64) string {
		return `{"order_id":"` + order + `","amount":` + itoa(amount) + `,"currency":"USD","reason":"broken"}`
	}
	humanRefund := func(amount int64) func(t *testing.T, op *sandbox.Operator) {
		return func(t *testing.T, op *sandbox.Operator) {
			must[systems.Refund](t)(op.Refund(ctx, "o_1001", amount, "USD", "human"))
		}
	}
	runRoutes(t, []routeCase{
		{name: "read charge", method: "GET", path: "/payments/charges/o_1001", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "ch_o_1001", "order_id": "o_1001", "amount": num(12000), "refunded": num(0), "currency": "USD"}, r.json(t))
			}},
		{name: "read charge of unknown order", method: "GET", path: "/payments/charges/o_9", status: 404, code: "not_found"},
		{name: "read charge of unpaid order", method: "GET", path: "/payments/charges/o_1003", status: 404, code: "not_found"},
		{name: "refund", method: "POST", path: "/payments/refunds", body: refund("o_1001", 2500), status: 200,
			events: ev("payments", "refund_created"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "re_1", "charge_id": "ch_o_1001", "order_id": "o_1001", "amount": num(2500),
					"currency": "USD", "reason": "broken", "status": "succeeded"}, r.json(t))
				got := evs["payments"][0]
				require.Equal(t, "order:o_1001", got.Subject)
				require.Equal(t, map[string]any{"refund_id": "re_1", "amount": num(2500), "currency": "USD", "reason": "broken", "status": "succeeded"}, attrs(t, got))
				require.Equal(t, num(2500), readJSON(t, e, "/payments/charges/o_1001")["refunded"])
			}},
		{name: "refund of the whole remainder", setup: humanRefund(10000), method: "POST", path: "/payments/refunds",
			body: refund("o_1001", 2000), status: 200, events: ev("payments", "refund_created")},
		{name: "refund above the remainder", setup: humanRefund(10000), method: "POST", path: "/payments/refunds",
			body: refund("o_1001", 2001), status: 400, code: "amount_too_large"},
		{name: "refund above the charge", method: "POST", path: "/payments/refunds", body: refund("o_1001", 12001), status: 400, code: "amount_too_large"},
		{name: "second full refund", setup: humanRefund(12000), method: "POST", path: "/payments/refunds",
			body: refund("o_1001", 12000), status: 400, code: "charge_already_refunded"},
		{name: "refund zero", method: "POST", path: "/payments/refunds", body: refund("o_1001", 0), status: 400, code: "invalid_amount"},
		{name: "refund negative", method: "POST", path: "/payments/refunds", body: refund("o_1001", -5), status: 400, code: "invalid_amount"},
		{name: "refund amount as string", method: "POST", path: "/payments/refunds", body: `{"order_id":"o_1001","amount":"25","currency":"USD"}`, status: 400, code: "invalid_request"},
		{name: "refund amount with cents as fraction", method: "POST", path: "/payments/refunds", body: `{"order_id":"o_1001","amount":25.5,"currency":"USD"}`, status: 400, code: "invalid_request"},
		{name: "refund amount overflowing int64", method: "POST", path: "/payments/refunds", body: `{"order_id":"o_1001","amount":99999999999999999999,"currency":"USD"}`, status: 400, code: "invalid_request"},
		{name: "refund without order", method: "POST", path: "/payments/refunds", body: `{"amount":100,"currency":"USD"}`, status: 400, code: "invalid_request"},
		{name: "refund without currency", method: "POST", path: "/payments/refunds", body: `{"order_id":"o_1001","amount":100}`, status: 400, code: "invalid_request"},
		{name: "refund lower-case currency", method: "POST", path: "/payments/refunds", body: `{"order_id":"o_1001","amount":100,"currency":"usd"}`, status: 400, code: "invalid_request"},
		{name: "refund in another currency", method: "POST", path: "/payments/refunds", body: `{"order_id":"o_1001","amount":100,"currency":"EUR"}`, status: 400, code: "currency_mismatch"},
		{name: "refund unknown order", method: "POST", path: "/payments/refunds", body: refund("o_9", 100), status: 404, code: "not_found"},
		{name: "refund unpaid order", method: "POST", path: "/payments/refunds", body: refund("o_1003", 100), status: 404, code: "not_found"},
		{name: "refund unknown field", method: "POST", path: "/payments/refunds", body: `{"order_id":"o_1001","amount":100,"currency":"USD","force":true}`, status: 400, code: "invalid_request"},
		{name: "refund malformed JSON", method: "POST", path: "/payments/refunds", body: `{"order_id":"o_1001",`, status: 400, code: "invalid_request"},
		{name: "refund JSON array", method: "POST", path: "/payments/refunds", body: `[]`, status: 400, code: "invalid_request"},
		{name: "refund two objects", method: "POST", path: "/payments/refunds", body: refund("o_1001", 100) + refund("o_1001", 100), status: 400, code: "invalid_request"},
		{name: "refund empty body", method: "POST", path: "/payments/refunds", status: 400, code: "invalid_request"},
		{name: "refund wrong method", method: "PUT", path: "/payments/refunds", body: refund("o_1001", 100), status: 405, code: "method_not_allowed"},
		{name: "stop billing", method: "POST", path: "/payments/billing/stop", body: `{"subscription_id":"sub_1"}`, status: 200,
			events: ev("payments", "billing_stopped"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "subscription:sub_1", evs["payments"][0].Subject)
				require.Equal(t, map[string]any{"subscription_id": "sub_1"}, attrs(t, evs["payments"][0]))
				require.Equal(t, map[string]any{"subscription_id": "sub_1", "status": "stopped"}, r.json(t))
			}},
		{name: "stop billing twice", setup: func(t *testing.T, op *sandbox.Operator) {
			must[systems.BillingStop](t)(op.StopBilling(ctx, "sub_1"))
		}, method: "POST", path: "/payments/billing/stop", body: `{"subscription_id":"sub_1"}`, status: 409, code: "billing_already_stopped"},
		{name: "stop billing of a cancelled subscription", method: "POST", path: "/payments/billing/stop", body: `{"subscription_id":"sub_3"}`, status: 409, code: "billing_already_stopped"},
		{name: "stop billing unknown", method: "POST", path: "/payments/billing/stop", body: `{"subscription_id":"sub_9"}`, status: 404, code: "not_found"},
		{name: "stop billing without id", method: "POST", path: "/payments/billing/stop", body: `{}`, status: 400, code: "invalid_request"},
		{name: "reverse refund", setup: humanRefund(3000), method: "POST", path: "/payments/refunds/re_1/reverse", status: 200,
			events: ev("payments", "refund_reversed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "order:o_1001", evs["payments"][0].Subject)
				require.Equal(t, map[string]any{"refund_id": "re_1", "amount": num(3000), "currency": "USD"}, attrs(t, evs["payments"][0]))
				require.Equal(t, "reversed", r.json(t)["status"])
				require.Equal(t, num(0), readJSON(t, e, "/payments/charges/o_1001")["refunded"])
			}},
		{name: "reverse refund twice", setup: func(t *testing.T, op *sandbox.Operator) {
			humanRefund(3000)(t, op)
			must[systems.Refund](t)(op.ReverseRefund(ctx, "re_1"))
		}, method: "POST", path: "/payments/refunds/re_1/reverse", status: 409, code: "refund_already_reversed"},
		{name: "reverse unknown refund", method: "POST", path: "/payments/refunds/re_9/reverse", status: 404, code: "not_found"},
		{name: "reverse with a body", setup: humanRefund(3000), method: "POST", path: "/payments/refunds/re_1/reverse", body: `{"amount":1}`, status: 400, code: "invalid_request"},
	})
}

func TestOrdersRoutes(t *testing.T) {
	runRoutes(t, []routeCase{
		{name: "read order", method: "GET", path: "/orders/orders/o_1001", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "o_1001", "customer_id": "c_1", "status": "paid", "total": num(12000),
					"currency": "USD", "address": "12 St James's Square, London", "discount_percent": num(0)}, r.json(t))
			}},
		{name: "read unknown order", method: "GET", path: "/orders/orders/o_9", status: 404, code: "not_found"},
		{name: "list a customer's orders", method: "GET", path: "/orders/orders?customer_id=c_1", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				var got struct{ Orders []systems.Order }
				require.NoError(t, json.Unmarshal(r.body, &got))
				require.Len(t, got.Orders, 2)
				require.Equal(t, "o_1001", got.Orders[0].ID)
				require.Equal(t, "o_1005", got.Orders[1].ID)
			}},
		{name: "list for a customer without orders", method: "GET", path: "/orders/orders?customer_id=c_9", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.JSONEq(t, `{"orders":[]}`, string(r.body))
			}},
		{name: "set status", method: "POST", path: "/orders/orders/o_1001/status", body: `{"status":"refunded"}`, status: 200,
			events: ev("orders", "order_status_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "order:o_1001", evs["orders"][0].Subject)
				require.Equal(t, map[string]any{"status": "refunded", "previous": "paid"}, attrs(t, evs["orders"][0]))
				require.Equal(t, "refunded", readJSON(t, e, "/orders/orders/o_1001")["status"])
			}},
		{name: "set the status it has", method: "POST", path: "/orders/orders/o_1001/status", body: `{"status":"paid"}`, status: 200},
		{name: "set unknown status", method: "POST", path: "/orders/orders/o_1001/status", body: `{"status":"lost"}`, status: 400, code: "invalid_request"},
		{name: "set status of unknown order", method: "POST", path: "/orders/orders/o_9/status", body: `{"status":"paid"}`, status: 404, code: "not_found"},
		{name: "set status as number", method: "POST", path: "/orders/orders/o_1001/status", body: `{"status":3}`, status: 400, code: "invalid_request"},
		{name: "change address", method: "POST", path: "/orders/orders/o_1002/address", body: `{"address":"7 Harbor Road, Norfolk"}`, status: 200,
			events: ev("orders", "address_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"address": "7 Harbor Road, Norfolk", "previous": "1 Navy Yard, Arlington"}, attrs(t, evs["orders"][0]))
				require.Equal(t, "7 Harbor Road, Norfolk", readJSON(t, e, "/orders/orders/o_1002")["address"])
			}},
		{name: "change to the same address", method: "POST", path: "/orders/orders/o_1002/address", body: `{"address":"1 Navy Yard, Arlington"}`, status: 200},
		{name: "empty address", method: "POST", path: "/orders/orders/o_1002/address", body: `{"address":"  "}`, status: 400, code: "invalid_request"},
		{name: "address too long", method: "POST", path: "/orders/orders/o_1002/address", body: `{"address":"` + strings.Repeat("a", 501) + `"}`, status: 400, code: "invalid_request"},
		{name: "address of unknown order", method: "POST", path: "/orders/orders/o_9/address", body: `{"address":"x"}`, status: 404, code: "not_found"},
		{name: "apply discount", method: "POST", path: "/orders/orders/o_1003/discounts", body: `{"percent":10}`, status: 200,
			events: ev("orders", "discount_applied"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"discount_id": "d_1", "percent": num(10)}, attrs(t, evs["orders"][0]))
				require.Equal(t, map[string]any{"id": "d_1", "order_id": "o_1003", "percent": num(10)}, r.json(t))
				require.Equal(t, num(10), readJSON(t, e, "/orders/orders/o_1003")["discount_percent"])
			}},
		{name: "discount of 100", method: "POST", path: "/orders/orders/o_1003/discounts", body: `{"percent":100}`, status: 200, events: ev("orders", "discount_applied")},
		{name: "discount of 0", method: "POST", path: "/orders/orders/o_1003/discounts", body: `{"percent":0}`, status: 400, code: "invalid_request"},
		{name: "discount of 101", method: "POST", path: "/orders/orders/o_1003/discounts", body: `{"percent":101}`, status: 400, code: "invalid_request"},
		{name: "discount of 12.5", method: "POST", path: "/orders/orders/o_1003/discounts", body: `{"percent":12.5}`, status: 400, code: "invalid_request"},
		{name: "discount of unknown order", method: "POST", path: "/orders/orders/o_9/discounts", body: `{"percent":10}`, status: 404, code: "not_found"},
	})
}

func TestCRMRoutes(t *testing.T) {
	runRoutes(t, []routeCase{
		{name: "read customer", method: "GET", path: "/crm/customers/c_1", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "c_1", "name": "Ada Lovelace", "email": "ada@example.com", "tier": "gold", "status": "active"}, r.json(t))
			}},
		{name: "read unknown customer", method: "GET", path: "/crm/customers/c_99", status: 404, code: "not_found"},
		{name: "read subscription", method: "GET", path: "/crm/subscriptions/sub_1", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "sub_1", "customer_id": "c_1", "plan": "pro", "status": "active", "price": num(4900), "currency": "USD"}, r.json(t))
			}},
		{name: "read unknown subscription", method: "GET", path: "/crm/subscriptions/sub_99", status: 404, code: "not_found"},
		{name: "cancel subscription", method: "POST", path: "/crm/subscriptions/sub_1/cancel", body: `{"reason":"customer asked"}`, status: 200,
			events: ev("crm", "subscription_status_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				got := evs["crm"][0]
				require.Equal(t, "subscription:sub_1", got.Subject)
				require.Equal(t, map[string]any{"status": "cancelled", "previous": "active"}, attrs(t, got))
				require.Equal(t, []string{"customer:c_1"}, links(t, got))
				require.Equal(t, "cancelled", readJSON(t, e, "/crm/subscriptions/sub_1")["status"])
			}},
		{name: "cancel without a body", method: "POST", path: "/crm/subscriptions/sub_2/cancel", status: 200, events: ev("crm", "subscription_status_changed")},
		{name: "cancel a cancelled subscription", method: "POST", path: "/crm/subscriptions/sub_3/cancel", body: `{}`, status: 409, code: "already_cancelled"},
		{name: "cancel unknown subscription", method: "POST", path: "/crm/subscriptions/sub_9/cancel", body: `{}`, status: 404, code: "not_found"},
		{name: "cancel with unknown field", method: "POST", path: "/crm/subscriptions/sub_1/cancel", body: `{"now":true}`, status: 400, code: "invalid_request"},
		{name: "freeze customer", method: "POST", path: "/crm/customers/c_2/status", body: `{"status":"frozen"}`, status: 200,
			events: ev("crm", "customer_status_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"status": "frozen", "previous": "active"}, attrs(t, evs["crm"][0]))
			}},
		{name: "customer status invalid", method: "POST", path: "/crm/customers/c_2/status", body: `{"status":"gone"}`, status: 400, code: "invalid_request"},
		{name: "customer status unknown customer", method: "POST", path: "/crm/customers/c_99/status", body: `{"status":"frozen"}`, status: 404, code: "not_found"},
	})
}

func TestTicketsRoutes(t *testing.T) {
	runRoutes(t, []routeCase{
		{name: "read ticket", method: "GET", path: "/tickets/tickets/t_1", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "t_1", "customer_id": "c_1", "about": "order:o_1001", "status": "open",
					"subject_line": "Refund for a broken order", "body": "My order o_1001 arrived broken. Please refund it.", "notes": []any{}}, r.json(t))
			}},
		{name: "read unknown ticket", method: "GET", path: "/tickets/tickets/t_99", status: 404, code: "not_found"},
		{name: "list tickets about an order", method: "GET", path: "/tickets/tickets?about=order:o_1001", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				var got struct{ Tickets []systems.Ticket }
				require.NoError(t, json.Unmarshal(r.body, &got))
				require.Len(t, got.Tickets, 1)
				require.Equal(t, "t_1", got.Tickets[0].ID)
			}},
		{name: "add note", method: "POST", path: "/tickets/tickets/t_1/notes", body: `{"body":"Refunded 25.00."}`, status: 200,
			events: ev("tickets", "note_added"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				got := evs["tickets"][0]
				require.Equal(t, "ticket:t_1", got.Subject)
				require.Equal(t, map[string]any{"note_id": "n_1", "body": "Refunded 25.00.", "author": "agent"}, attrs(t, got))
				require.Equal(t, []string{"order:o_1001", "customer:c_1"}, links(t, got))
				notes := readJSON(t, e, "/tickets/tickets/t_1")["notes"].([]any)
				require.Len(t, notes, 1)
				require.Equal(t, "Refunded 25.00.", notes[0].(map[string]any)["body"])
			}},
		{name: "add note as a human", method: "POST", path: "/tickets/tickets/t_4/notes", body: `{"body":"Called the customer.","author":"human"}`, status: 200,
			events: ev("tickets", "note_added"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "human", attrs(t, evs["tickets"][0])["author"])
				require.Equal(t, []string{"subscription:sub_1", "customer:c_1"}, links(t, evs["tickets"][0]))
			}},
		{name: "add empty note", method: "POST", path: "/tickets/tickets/t_1/notes", body: `{"body":" "}`, status: 400, code: "invalid_request"},
		{name: "add note with a bad author", method: "POST", path: "/tickets/tickets/t_1/notes", body: `{"body":"x","author":"a b"}`, status: 400, code: "invalid_request"},
		{name: "add note to unknown ticket", method: "POST", path: "/tickets/tickets/t_99/notes", body: `{"body":"x"}`, status: 404, code: "not_found"},
		{name: "close ticket", method: "POST", path: "/tickets/tickets/t_1/close", body: `{"resolution":"Refunded."}`, status: 200,
			events: ev("tickets", "ticket_status_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"status": "closed", "previous": "open", "resolution": "Refunded."}, attrs(t, evs["tickets"][0]))
				require.Equal(t, []string{"order:o_1001", "customer:c_1"}, links(t, evs["tickets"][0]))
				require.Equal(t, "closed", readJSON(t, e, "/tickets/tickets/t_1")["status"])
			}},
		{name: "close a closed ticket", method: "POST", path: "/tickets/tickets/t_5/close", body: `{"resolution":"again"}`, status: 409, code: "already_closed"},
		{name: "close without resolution", method: "POST", path: "/tickets/tickets/t_1/close", body: `{}`, status: 400, code: "invalid_request"},
		{name: "close unknown ticket", method: "POST", path: "/tickets/tickets/t_99/close", body: `{"resolution":"x"}`, status: 404, code: "not_found"},
	})
}

func TestLedgerRoutes(t *testing.T) {
	payout := func(acc string, amount int64) string {
		return `{"account_id":"` + acc + `","amount":` + itoa(amount) + `,"currency":"USD"}`
	}
	sent := func(t *testing.T, op *sandbox.Operator) {
		must[systems.Payout](t)(op.SendPayout(ctx, "acc_1", 5000, "USD"))
	}
	runRoutes(t, []routeCase{
		{name: "read account", method: "GET", path: "/ledger/accounts/acc_3", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "acc_3", "holder": "Fabrikam Inc", "status": "frozen", "currency": "USD"}, r.json(t))
			}},
		{name: "read unknown account", method: "GET", path: "/ledger/accounts/acc_9", status: 404, code: "not_found"},
		{name: "send payout", method: "POST", path: "/ledger/payouts", body: payout("acc_1", 5000), status: 200,
			events: ev("ledger", "payout_sent"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "account:acc_1", evs["ledger"][0].Subject)
				require.Equal(t, map[string]any{"payout_id": "po_1", "amount": num(5000), "currency": "USD"}, attrs(t, evs["ledger"][0]))
				require.Equal(t, map[string]any{"id": "po_1", "account_id": "acc_1", "amount": num(5000), "currency": "USD", "status": "sent"}, r.json(t))
			}},
		{name: "payout to a frozen account", method: "POST", path: "/ledger/payouts", body: payout("acc_3", 5000), status: 403, code: "account_frozen"},
		{name: "payout of zero", method: "POST", path: "/ledger/payouts", body: payout("acc_1", 0), status: 400, code: "invalid_amount"},
		{name: "payout negative", method: "POST", path: "/ledger/payouts", body: payout("acc_1", -1), status: 400, code: "invalid_amount"},
		{name: "payout in another currency", method: "POST", path: "/ledger/payouts", body: `{"account_id":"acc_1","amount":5,"currency":"EUR"}`, status: 400, code: "currency_mismatch"},
		{name: "payout to unknown account", method: "POST", path: "/ledger/payouts", body: payout("acc_9", 5), status: 404, code: "not_found"},
		{name: "payout without account", method: "POST", path: "/ledger/payouts", body: `{"amount":5,"currency":"USD"}`, status: 400, code: "invalid_request"},
		{name: "return payout", setup: sent, method: "POST", path: "/ledger/payouts/po_1/return", body: `{"reason":"account closed"}`, status: 200,
			events: ev("ledger", "payout_returned"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "account:acc_1", evs["ledger"][0].Subject)
				require.Equal(t, map[string]any{"payout_id": "po_1", "amount": num(5000), "currency": "USD", "reason": "account closed"}, attrs(t, evs["ledger"][0]))
			}},
		{name: "return payout twice", setup: func(t *testing.T, op *sandbox.Operator) {
			sent(t, op)
			must[systems.Payout](t)(op.ReturnPayout(ctx, "po_1", "r"))
		}, method: "POST", path: "/ledger/payouts/po_1/return", body: `{"reason":"again"}`, status: 409, code: "payout_already_returned"},
		{name: "return unknown payout", method: "POST", path: "/ledger/payouts/po_9/return", body: `{}`, status: 404, code: "not_found"},
		{name: "freeze account", method: "POST", path: "/ledger/accounts/acc_1/status", body: `{"status":"frozen"}`, status: 200,
			events: ev("ledger", "account_status_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"status": "frozen", "previous": "active"}, attrs(t, evs["ledger"][0]))
				r2 := call(t, e, "POST", "/ledger/payouts", payout("acc_1", 5), "")
				require.Equal(t, 403, r2.status)
			}},
		{name: "account status invalid", method: "POST", path: "/ledger/accounts/acc_1/status", body: `{"status":"closed"}`, status: 400, code: "invalid_request"},
	})
}

func TestPlatformRoutes(t *testing.T) {
	deployed := func(t *testing.T, op *sandbox.Operator) {
		must[systems.Deployment](t)(op.Deploy(ctx, "svc_api", "1.5.0", "production"))
	}
	runRoutes(t, []routeCase{
		{name: "read service", method: "GET", path: "/platform/services/svc_worker", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "svc_worker", "name": "worker", "status": "degraded", "version": "0.9.8", "environment": "production"}, r.json(t))
			}},
		{name: "read unknown service", method: "GET", path: "/platform/services/svc_x", status: 404, code: "not_found"},
		{name: "deploy", method: "POST", path: "/platform/services/svc_api/deploy", body: `{"version":"1.5.0","environment":"staging"}`, status: 200,
			events: map[string][]string{"platform": {"deployed", "health_reported"}},
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "service:svc_api", evs["platform"][0].Subject)
				require.Equal(t, map[string]any{"deployment_id": "dep_1", "version": "1.5.0", "environment": "staging"}, attrs(t, evs["platform"][0]))
				require.Equal(t, map[string]any{"status": "healthy", "version": "1.5.0"}, attrs(t, evs["platform"][1]))
				require.Equal(t, map[string]any{"id": "dep_1", "service_id": "svc_api", "version": "1.5.0", "environment": "staging",
					"previous_version": "1.4.2", "health": "healthy", "status": "deployed"}, r.json(t))
				svc := readJSON(t, e, "/platform/services/svc_api")
				require.Equal(t, "1.5.0", svc["version"])
				require.Equal(t, "staging", svc["environment"])
			}},
		{name: "deploy with a failing health check", setup: func(t *testing.T, op *sandbox.Operator) {
			must[systems.Service](t)(op.FailNextHealthCheck(ctx, "svc_api", true))
		}, method: "POST", path: "/platform/services/svc_api/deploy", body: `{"version":"1.5.0","environment":"production"}`, status: 200,
			events: map[string][]string{"platform": {"deployed", "health_reported"}},
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"status": "unhealthy", "version": "1.5.0"}, attrs(t, evs["platform"][1]))
				// Only the next deploy fails its check.
				r2 := call(t, e, "POST", "/platform/services/svc_api/deploy", `{"version":"1.5.1","environment":"production"}`, "")
				require.Equal(t, "healthy", r2.json(t)["health"])
			}},
		{name: "deploy to an unknown environment", method: "POST", path: "/platform/services/svc_api/deploy", body: `{"version":"1.5.0","environment":"dev"}`, status: 400, code: "invalid_request"},
		{name: "deploy without version", method: "POST", path: "/platform/services/svc_api/deploy", body: `{"environment":"staging"}`, status: 400, code: "invalid_request"},
		{name: "deploy a version with spaces", method: "POST", path: "/platform/services/svc_api/deploy", body: `{"version":"1 5","environment":"staging"}`, status: 400, code: "invalid_request"},
		{name: "deploy unknown service", method: "POST", path: "/platform/services/svc_x/deploy", body: `{"version":"1","environment":"staging"}`, status: 404, code: "not_found"},
		{name: "roll back", setup: deployed, method: "POST", path: "/platform/deployments/dep_1/rollback", status: 200,
			events: ev("platform", "rolled_back"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "service:svc_api", evs["platform"][0].Subject)
				require.Equal(t, map[string]any{"deployment_id": "dep_1", "to_version": "1.4.2"}, attrs(t, evs["platform"][0]))
				require.Equal(t, "1.4.2", readJSON(t, e, "/platform/services/svc_api")["version"])
				require.Equal(t, "rolled_back", readJSON(t, e, "/platform/deployments/dep_1")["status"])
			}},
		{name: "roll back twice", setup: func(t *testing.T, op *sandbox.Operator) {
			deployed(t, op)
			must[systems.Deployment](t)(op.RollBack(ctx, "dep_1"))
		}, method: "POST", path: "/platform/deployments/dep_1/rollback", status: 409, code: "already_rolled_back"},
		{name: "roll back unknown deployment", method: "POST", path: "/platform/deployments/dep_9/rollback", status: 404, code: "not_found"},
		{name: "read unknown deployment", method: "GET", path: "/platform/deployments/dep_9", status: 404, code: "not_found"},
		{name: "degrade service", method: "POST", path: "/platform/services/svc_api/status", body: `{"status":"degraded"}`, status: 200,
			events: ev("platform", "service_status_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"status": "degraded", "previous": "healthy"}, attrs(t, evs["platform"][0]))
			}},
		{name: "service status invalid", method: "POST", path: "/platform/services/svc_api/status", body: `{"status":"down"}`, status: 400, code: "invalid_request"},
		{name: "configure health check emits nothing", method: "POST", path: "/platform/services/svc_api/health_check", body: `{"fail_next":true}`, status: 200},
		{name: "configure health check of unknown service", method: "POST", path: "/platform/services/svc_x/health_check", body: `{"fail_next":true}`, status: 404, code: "not_found"},
	})
}

func TestBrokerRoutes(t *testing.T) {
	trade := func(product, side string, qty, limit int64) string {
		return `{"product_id":"` + product + `","account_id":"acc_1","side":"` + side + `","quantity":` + itoa(qty) + `,"limit_price":` + itoa(limit) + `}`
	}
	filled := func(t *testing.T, op *sandbox.Operator) {
		must[systems.BrokerOrder](t)(op.PlaceOrder(ctx, systems.TradeRequest{ProductID: "p_acme", AccountID: "acc_1", Side: "buy", Quantity: 2, LimitPrice: 16000}))
	}
	runRoutes(t, []routeCase{
		{name: "read product", method: "GET", path: "/broker/products/p_acme", status: 200,
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				require.Equal(t, map[string]any{"id": "p_acme", "symbol": "ACME", "status": "trading", "price": num(15000), "currency": "USD"}, r.json(t))
			}},
		{name: "read unknown product", method: "GET", path: "/broker/products/p_x", status: 404, code: "not_found"},
		{name: "buy within the limit fills", method: "POST", path: "/broker/orders", body: trade("p_acme", "buy", 2, 16000), status: 200,
			events: map[string][]string{"broker": {"order_placed", "order_filled"}},
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "product:p_acme", evs["broker"][0].Subject)
				require.Equal(t, map[string]any{"broker_order_id": "bo_1", "account_id": "acc_1", "side": "buy", "quantity": num(2), "limit_price": num(16000)}, attrs(t, evs["broker"][0]))
				require.Equal(t, map[string]any{"fill_id": "f_1", "broker_order_id": "bo_1", "account_id": "acc_1", "side": "buy", "quantity": num(2),
					"price": num(15000), "notional": num(30000)}, attrs(t, evs["broker"][1]))
				require.Equal(t, "filled", r.json(t)["status"])
			}},
		{name: "buy at exactly the price fills", method: "POST", path: "/broker/orders", body: trade("p_acme", "buy", 1, 15000), status: 200,
			events: map[string][]string{"broker": {"order_placed", "order_filled"}}},
		{name: "buy below the price does not fill", method: "POST", path: "/broker/orders", body: trade("p_acme", "buy", 2, 14000), status: 200,
			events: ev("broker", "order_placed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, _ map[string][]systems.Event) {
				m := r.json(t)
				require.Equal(t, "open", m["status"])
				require.Nil(t, m["fill"])
			}},
		{name: "sell above the limit fills", method: "POST", path: "/broker/orders", body: trade("p_acme", "sell", 3, 14000), status: 200,
			events: map[string][]string{"broker": {"order_placed", "order_filled"}}},
		{name: "sell below the limit does not fill", method: "POST", path: "/broker/orders", body: trade("p_acme", "sell", 3, 16000), status: 200,
			events: ev("broker", "order_placed")},
		{name: "halted product", method: "POST", path: "/broker/orders", body: trade("p_initech", "buy", 1, 10000), status: 409, code: "product_halted"},
		{name: "side hold", method: "POST", path: "/broker/orders", body: trade("p_acme", "hold", 1, 16000), status: 400, code: "invalid_request"},
		{name: "quantity zero", method: "POST", path: "/broker/orders", body: trade("p_acme", "buy", 0, 16000), status: 400, code: "invalid_request"},
		{name: "quantity huge", method: "POST", path: "/broker/orders", body: trade("p_acme", "buy", 1_000_001, 16000), status: 400, code: "invalid_request"},
		{name: "limit price zero", method: "POST", path: "/broker/orders", body: trade("p_acme", "buy", 1, 0), status: 400, code: "invalid_request"},
		{name: "unknown product", method: "POST", path: "/broker/orders", body: trade("p_x", "buy", 1, 100), status: 404, code: "not_found"},
		{name: "bust fill", setup: filled, method: "POST", path: "/broker/fills/f_1/bust", body: `{"reason":"erroneous trade"}`, status: 200,
			events: ev("broker", "fill_busted"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, "product:p_acme", evs["broker"][0].Subject)
				require.Equal(t, map[string]any{"fill_id": "f_1", "broker_order_id": "bo_1", "reason": "erroneous trade"}, attrs(t, evs["broker"][0]))
				require.Equal(t, "busted", r.json(t)["status"])
			}},
		{name: "bust twice", setup: func(t *testing.T, op *sandbox.Operator) {
			filled(t, op)
			must[systems.Fill](t)(op.BustFill(ctx, "f_1", "x"))
		}, method: "POST", path: "/broker/fills/f_1/bust", body: `{}`, status: 409, code: "fill_already_busted"},
		{name: "bust unknown fill", method: "POST", path: "/broker/fills/f_9/bust", body: `{}`, status: 404, code: "not_found"},
		{name: "halt product", method: "POST", path: "/broker/products/p_acme/status", body: `{"status":"halted"}`, status: 200,
			events: ev("broker", "product_status_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"status": "halted", "previous": "trading"}, attrs(t, evs["broker"][0]))
				require.Equal(t, 409, call(t, e, "POST", "/broker/orders", trade("p_acme", "buy", 1, 16000), "").status)
			}},
		{name: "product status invalid", method: "POST", path: "/broker/products/p_acme/status", body: `{"status":"open"}`, status: 400, code: "invalid_request"},
		{name: "move price", method: "POST", path: "/broker/products/p_acme/price", body: `{"price":17000}`, status: 200,
			events: ev("broker", "product_price_changed"),
			check: func(t *testing.T, e *sandbox.Enterprise, r resp, evs map[string][]systems.Event) {
				require.Equal(t, map[string]any{"price": num(17000), "previous": num(15000), "currency": "USD"}, attrs(t, evs["broker"][0]))
				require.Equal(t, "open", call(t, e, "POST", "/broker/orders", trade("p_acme", "buy", 1, 16000), "").json(t)["status"])
			}},
		{name: "price zero", method: "POST", path: "/broker/products/p_acme/price", body: `{"price":0}`, status: 400, code: "invalid_amount"},
	})
}

func TestUnknownRoutes(t *testing.T) {
	runRoutes(t, []routeCase{
		{name: "unknown system", method: "GET", path: "/hr/people", status: 404, code: "not_found"},
		{name: "unknown route", method: "POST", path: "/payments/payouts", body: `{}`, status: 404, code: "not_found"},
		{name: "root", method: "GET", path: "/", status: 404, code: "not_found"},
		{name: "wrong method on a read", method: "DELETE", path: "/orders/orders/o_1001", status: 405, code: "method_not_allowed"},
	})
}
