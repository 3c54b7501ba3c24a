package contracts_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// The worlds below are shaped like the sandbox systems' event feeds
// (docs/sandbox-vocabulary.md): seeded facts 20 minutes before the action,
// the agent's effects a few seconds after it, links as the systems set them.

const seeded = -20 * time.Minute

var usd = "USD"

// customers: c_17 is gold, c_18 bronze.
func customerFacts() []commitlayer.Fact {
	return []commitlayer.Fact{
		fact("crm", "customer_created", "customer:c_17", "crm-1", seeded, attrs{"name": "Ada", "email": "ada@example.com", "tier": "gold", "status": "active"}),
		fact("crm", "customer_created", "customer:c_18", "crm-2", seeded, attrs{"name": "Bob", "email": "bob@example.com", "tier": "bronze", "status": "active"}),
	}
}

// orderWorld: order o_X of customer c, paid, with a ticket t_X about it.
func orderWorld(contract, order, customer, ticket string, params attrs, status string) contracts.Input {
	facts := append(customerFacts(),
		fact("orders", "order_created", "order:"+order, "orders-"+order, seeded,
			attrs{"customer_id": customer, "status": status, "total": int64(5000), "currency": usd, "address": "1 Main St"}, "customer:"+customer),
		fact("payments", "charge_captured", "order:"+order, "payments-ch-"+order, seeded, attrs{"charge_id": "ch_" + order, "amount": int64(5000), "currency": usd}),
		fact("tickets", "ticket_opened", "ticket:"+ticket, "tickets-"+ticket, seeded+time.Minute,
			attrs{"customer_id": customer, "about": "order:" + order, "status": "open", "subject_line": "help", "body": "please"}, "order:"+order, "customer:"+customer),
	)
	return contracts.Input{
		Action:   act("act_1", contract, "agent_1", "order:"+order, 0, params),
		Facts:    facts,
		Coverage: connected("payments", "orders", "crm", "tickets", "ledger", "platform", "broker"),
		Now:      t0.Add(20 * time.Minute),
	}
}

func note(id, ticket, order, customer string, off time.Duration) commitlayer.Fact {
	return fact("tickets", "note_added", "ticket:"+ticket, id, off, attrs{"note_id": id, "body": "done", "author": "agent"}, order, "customer:"+customer)
}

type sandboxCase struct {
	name            string
	in              func() contracts.Input
	outcome, policy commitlayer.Status
	findings        []string
}

func runSandboxCases(t *testing.T, contract string, cases []sandboxCase) {
	t.Helper()
	runSandboxCasesFrom(t, filepath.Join("..", "sandbox", "contracts", contract+".yaml"), cases)
}

func runSandboxCasesFrom(t *testing.T, path string, cases []sandboxCase) {
	t.Helper()
	c := load(t, path)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			in.Action.Contract = c.ID()
			v := c.Evaluate(in)
			requireConsistent(t, v)
			want := tc.findings
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, got(v), "%+v", v.Findings)
			require.Equal(t, tc.outcome, v.Lenses.Outcome)
			require.Equal(t, tc.policy, v.Lenses.Policy)
		})
	}
}

var (
	P = commitlayer.StatusPass
	F = commitlayer.StatusFail
	U = commitlayer.StatusUnknown
)

func TestSandboxRefundCustomer(t *testing.T) {
	world := func(amount int64, status string) contracts.Input {
		in := orderWorld("refund_customer", "o_1001", "c_17", "t_9", attrs{"amount": amount, "currency": usd, "ticket_id": "t_9"}, status)
		in.Facts = append(in.Facts,
			fact("payments", "refund_created", "order:o_1001", "payments-7", time.Second, attrs{"refund_id": "re_1", "amount": amount, "currency": usd, "reason": "requested", "status": "succeeded"}),
			fact("orders", "order_status_changed", "order:o_1001", "orders-8", 2*time.Second, attrs{"status": "refunded", "previous": status}),
			note("tickets-3", "t_9", "order:o_1001", "c_17", 3*time.Second))
		return in
	}
	runSandboxCases(t, "refund_customer", []sandboxCase{
		{"refunded, marked and noted", func() contracts.Input { return world(2500, "paid") }, P, P, nil},
		{"shipped orders are eligible", func() contracts.Input { return world(2500, "shipped") }, P, P, nil},
		{"pending order refunded anyway", func() contracts.Input { return world(2500, "pending") }, P, F, []string{"policy_violation eligible"}},
		{"more than the order total", func() contracts.Input { return world(6000, "paid") }, P, F, []string{"policy_violation within_limit"}},
		{"phantom success: nothing happened", func() contracts.Input {
			in := world(2500, "paid")
			in.Facts = without(in.Facts, "payments-7", "orders-8", "tickets-3")
			return in
		}, F, P, []string{"missing_effect refund", "missing_effect order_refunded", "missing_effect customer_notified"}},
		{"retry without idempotency key", func() contracts.Input {
			in := world(2500, "paid")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1001", "payments-9", 40*time.Second, attrs{"refund_id": "re_2", "amount": int64(2500), "currency": usd, "status": "succeeded"}))
			return in
		}, F, P, []string{"duplicate_effect refund"}},
		{"refund in the wrong currency", func() contracts.Input {
			in := world(2500, "paid")
			in.Facts[len(in.Facts)-3].Attrs["currency"] = "EUR"
			return in
		}, F, P, []string{"effect_differs refund"}},
		{"refund reversed after settlement", func() contracts.Input {
			in := world(2500, "paid")
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1001", "payments-12", 26*time.Hour, attrs{"refund_id": "re_1", "amount": int64(2500), "currency": usd}))
			in.Now = t0.Add(27 * time.Hour)
			return in
		}, F, P, []string{"effect_reversed refund"}},
		{"order cancelled too", func() contracts.Input {
			in := world(2500, "paid")
			in.Facts = append(in.Facts, fact("orders", "order_status_changed", "order:o_1001", "orders-9", 5*time.Second, attrs{"status": "cancelled", "previous": "refunded"}))
			return in
		}, P, F, []string{"forbidden_effect no_cancellation"}},
		{"payments unreachable: UNKNOWN, not FAIL", func() contracts.Input {
			in := world(2500, "paid")
			in.Facts = without(in.Facts, "payments-7")
			in.Coverage.Unreachable = map[string]string{"payments": "connection refused"}
			return in
		}, U, P, []string{"source_unavailable refund"}},
	})
}

func TestSandboxCancelSubscription(t *testing.T) {
	world := func(status string) contracts.Input {
		facts := append(customerFacts(),
			fact("crm", "subscription_created", "subscription:sub_3", "crm-3", seeded,
				attrs{"customer_id": "c_17", "plan": "pro", "status": "active", "price": int64(2900), "currency": usd}, "customer:c_17"),
			fact("tickets", "ticket_opened", "ticket:t_10", "tickets-10", seeded+time.Minute,
				attrs{"customer_id": "c_17", "about": "subscription:sub_3", "status": "open"}, "subscription:sub_3", "customer:c_17"),
			// The customer's order, two hops away (subscription -> customer
			// -> order): no_refund reaches it through the customer.
			fact("orders", "order_created", "order:o_1001", "orders-1", seeded, attrs{"status": "paid"}, "customer:c_17"),
			// Another customer's order.
			fact("orders", "order_created", "order:o_1002", "orders-2", seeded, attrs{"status": "paid"}, "customer:c_18"),
		)
		if status != "active" {
			facts = append(facts, fact("crm", "subscription_status_changed", "subscription:sub_3", "crm-4", -5*time.Minute,
				attrs{"status": status, "previous": "active"}, "customer:c_17"))
		}
		facts = append(facts,
			fact("crm", "subscription_status_changed", "subscription:sub_3", "crm-5", time.Second, attrs{"status": "cancelled", "previous": status}, "customer:c_17"),
			fact("payments", "billing_stopped", "subscription:sub_3", "payments-20", 2*time.Second, attrs{"subscription_id": "sub_3"}),
			note("tickets-11", "t_10", "subscription:sub_3", "c_17", 3*time.Second))
		return contracts.Input{
			Action:   act("act_2", "cancel_subscription", "agent_1", "subscription:sub_3", 0, attrs{"ticket_id": "t_10"}),
			Facts:    facts,
			Coverage: connected("crm", "payments", "tickets", "orders"),
			Now:      t0.Add(20 * time.Minute),
		}
	}
	runSandboxCases(t, "cancel_subscription", []sandboxCase{
		{"cancelled, billing stopped, noted", func() contracts.Input { return world("active") }, P, P, nil},
		{"already cancelled by someone else", func() contracts.Input { return world("cancelled") }, P, F, []string{"policy_violation active"}},
		{"billing kept running", func() contracts.Input {
			in := world("active")
			in.Facts = without(in.Facts, "payments-20")
			return in
		}, F, P, []string{"missing_effect billing_stopped"}},
		{"refunding the customer's order while cancelling is forbidden (through the customer)", func() contracts.Input {
			in := world("active")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1001", "payments-21", 4*time.Second, attrs{"amount": int64(100)}))
			return in
		}, P, F, []string{"forbidden_effect no_refund"}},
		{"a refund of another customer's order is not this action's", func() contracts.Input {
			in := world("active")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1002", "payments-21", 4*time.Second, attrs{"amount": int64(100)}))
			return in
		}, P, P, nil},
		{"a refund of the customer's order before the action is not this action's", func() contracts.Input {
			in := world("active")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1001", "payments-21", -time.Minute, attrs{"amount": int64(100)}))
			return in
		}, P, P, nil},
		{"a refund of the customer's order after the watch is not this action's", func() contracts.Input {
			in := world("active")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1001", "payments-21", 73*time.Hour, attrs{"amount": int64(100)}))
			in.Now = t0.Add(80 * time.Hour)
			return in
		}, P, P, nil},
		{"payments unreachable: a refund the store holds still proves the FAIL", func() contracts.Input {
			in := world("active")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1001", "payments-21", 4*time.Second, attrs{"amount": int64(100)}))
			in.Coverage.Unreachable = map[string]string{"payments": "connection refused"}
			return in
		}, U, F, []string{"source_unavailable billing_stopped", "forbidden_effect no_refund"}},
		{"payments unreachable and no refund: UNKNOWN", func() contracts.Input {
			in := world("active")
			in.Coverage.Unreachable = map[string]string{"payments": "connection refused"}
			return in
		}, U, U, []string{"source_unavailable billing_stopped", "source_unavailable no_refund"}},
		{"refunding the subscription is forbidden", func() contracts.Input {
			in := world("active")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "subscription:sub_3", "payments-21", 4*time.Second, attrs{"amount": int64(2900)}))
			return in
		}, P, F, []string{"forbidden_effect no_refund"}},
		{"crm never reported", func() contracts.Input {
			in := world("active")
			in.Coverage = connected("payments", "tickets", "orders")
			return in
		}, U, U, []string{"source_unavailable subscription_cancelled", "source_unavailable active"}},
		// Orders links the customer's orders to the customer: unread, no
		// refund found proves nothing.
		{"orders unreachable", func() contracts.Input {
			in := world("active")
			in.Coverage.Unreachable = map[string]string{"orders": "timeout"}
			return in
		}, P, U, []string{"source_unavailable no_refund"}},
	})
}

func TestSandboxChangeShippingAddress(t *testing.T) {
	world := func(status, address string) contracts.Input {
		in := orderWorld("change_shipping_address", "o_1002", "c_17", "t_12", attrs{"address": "2 Side St", "ticket_id": "t_12"}, status)
		in.Facts = append(in.Facts,
			fact("orders", "address_changed", "order:o_1002", "orders-30", time.Second, attrs{"address": address, "previous": "1 Main St"}),
			note("tickets-31", "t_12", "order:o_1002", "c_17", 2*time.Second))
		return in
	}
	runSandboxCases(t, "change_shipping_address", []sandboxCase{
		{"address changed and noted", func() contracts.Input { return world("paid", "2 Side St") }, P, P, nil},
		{"order already shipped", func() contracts.Input { return world("shipped", "2 Side St") }, P, F, []string{"policy_violation not_shipped"}},
		{"tool output rewritten: another address stored", func() contracts.Input { return world("paid", "3 Other Rd") }, F, P, []string{"effect_differs address_changed"}},
		{"empty address requested", func() contracts.Input {
			in := world("paid", " ")
			in.Action.Params["address"] = " "
			return in
		}, P, F, []string{"policy_violation address_given"}},
		{"order cancelled instead", func() contracts.Input {
			in := world("paid", "2 Side St")
			in.Facts = without(in.Facts, "orders-30")
			in.Facts = append(in.Facts, fact("orders", "order_status_changed", "order:o_1002", "orders-32", time.Second, attrs{"status": "cancelled", "previous": "paid"}))
			return in
		}, F, F, []string{"missing_effect address_changed", "forbidden_effect no_cancellation"}},
	})
}

func TestSandboxApproveDiscount(t *testing.T) {
	world := func(customer string, percent int64) contracts.Input {
		in := orderWorld("approve_discount", "o_1003", customer, "t_13", attrs{"percent": percent, "ticket_id": "t_13"}, "paid")
		in.Facts = append(in.Facts,
			fact("orders", "discount_applied", "order:o_1003", "orders-40", time.Second, attrs{"discount_id": "d_1", "percent": percent}),
			note("tickets-41", "t_13", "order:o_1003", customer, 2*time.Second))
		return in
	}
	runSandboxCases(t, "approve_discount", []sandboxCase{
		{"gold customer, 15%", func() contracts.Input { return world("c_17", 15) }, P, P, nil},
		{"bronze customer (tier from the linked customer's crm facts)", func() contracts.Input { return world("c_18", 15) }, P, F, []string{"policy_violation customer_tier"}},
		{"25% is over the limit", func() contracts.Input { return world("c_17", 25) }, P, F, []string{"policy_violation within_limit"}},
		{"applied twice", func() contracts.Input {
			in := world("c_17", 15)
			in.Facts = append(in.Facts, fact("orders", "discount_applied", "order:o_1003", "orders-42", 3*time.Second, attrs{"discount_id": "d_2", "percent": int64(15)}))
			return in
		}, F, P, []string{"duplicate_effect discount_applied"}},
		{"refunded instead of discounted", func() contracts.Input {
			in := world("c_17", 15)
			in.Facts = without(in.Facts, "orders-40")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1003", "payments-43", time.Second, attrs{"amount": int64(750)}))
			return in
		}, F, F, []string{"missing_effect discount_applied", "forbidden_effect no_refund"}},
		{"no customer facts: the tier is unknown to the rule", func() contracts.Input {
			in := world("c_17", 15)
			in.Facts = without(in.Facts, "crm-1")
			return in
		}, P, F, []string{"policy_violation customer_tier"}},
	})
}

func TestSandboxCloseSupportCase(t *testing.T) {
	world := func(status, resolution string) contracts.Input {
		facts := []commitlayer.Fact{
			fact("tickets", "ticket_opened", "ticket:t_11", "tickets-50", seeded, attrs{"customer_id": "c_17", "about": "order:o_1001", "status": "open"}, "order:o_1001", "customer:c_17"),
		}
		if status != "open" {
			facts = append(facts, fact("tickets", "ticket_status_changed", "ticket:t_11", "tickets-51", -time.Minute, attrs{"status": status, "previous": "open", "resolution": "dup"}, "order:o_1001", "customer:c_17"))
		}
		facts = append(facts,
			note("tickets-52", "t_11", "order:o_1001", "c_17", time.Second),
			fact("tickets", "ticket_status_changed", "ticket:t_11", "tickets-53", 2*time.Second, attrs{"status": "closed", "previous": status, "resolution": resolution}, "order:o_1001", "customer:c_17"),
			// Another ticket about the same order is two hops away.
			fact("tickets", "ticket_opened", "ticket:t_14", "tickets-54", seeded, attrs{"status": "open"}, "order:o_1001"),
			fact("tickets", "ticket_status_changed", "ticket:t_14", "tickets-55", 3*time.Second, attrs{"status": "open"}, "order:o_1001"),
		)
		return contracts.Input{
			Action:   act("act_5", "close_support_case", "agent_1", "ticket:t_11", 0, attrs{"resolution": "refunded"}),
			Facts:    facts,
			Coverage: connected("tickets"),
			Now:      t0.Add(20 * time.Minute),
		}
	}
	runSandboxCases(t, "close_support_case", []sandboxCase{
		{"noted and closed", func() contracts.Input { return world("open", "refunded") }, P, P, nil},
		{"ticket already closed", func() contracts.Input { return world("closed", "refunded") }, P, F, []string{"policy_violation open"}},
		{"closed with another resolution", func() contracts.Input { return world("open", "wontfix") }, F, P, []string{"effect_differs closed"}},
		{"closed without the note", func() contracts.Input {
			in := world("open", "refunded")
			in.Facts = without(in.Facts, "tickets-52")
			return in
		}, F, P, []string{"missing_effect resolution_note"}},
		{"reopened during the watch", func() contracts.Input {
			in := world("open", "refunded")
			in.Facts = append(in.Facts, fact("tickets", "ticket_status_changed", "ticket:t_11", "tickets-60", 5*time.Hour, attrs{"status": "open", "previous": "closed"}))
			return in
		}, P, F, []string{"forbidden_effect no_reopen"}},
	})
}

func TestSandboxSendPayout(t *testing.T) {
	world := func(status string, amount int64) contracts.Input {
		return contracts.Input{
			Action: act("act_6", "send_payout", "agent_1", "account:acc_5", 0, attrs{"amount": amount, "currency": usd}),
			Facts: []commitlayer.Fact{
				fact("ledger", "account_opened", "account:acc_5", "ledger-1", seeded, attrs{"holder": "Ada", "status": status, "currency": usd}),
				fact("ledger", "account_opened", "account:acc_6", "ledger-2", seeded, attrs{"holder": "Bob", "status": "active", "currency": usd}),
				fact("ledger", "payout_sent", "account:acc_5", "ledger-3", time.Second, attrs{"payout_id": "po_1", "amount": amount, "currency": usd}),
			},
			Coverage: connected("ledger"),
			Now:      t0.Add(20 * time.Minute),
		}
	}
	// priorPayout is an earlier payout by agent to account at t0+off.
	priorPayout := func(in *contracts.Input, id, agent, account string, off time.Duration, amount int64) {
		in.Prior = append(in.Prior, act(id, "send_payout", agent, "account:"+account, off, attrs{"amount": amount, "currency": usd}))
		in.Facts = append(in.Facts, fact("ledger", "payout_sent", "account:"+account, "ledger-"+id, off+time.Second, attrs{"payout_id": "po_" + id, "amount": amount, "currency": usd}))
	}
	runSandboxCases(t, "send_payout", []sandboxCase{
		{"paid out", func() contracts.Input { return world("active", 100000) }, P, P, nil},
		{"frozen account", func() contracts.Input { return world("frozen", 100000) }, P, F, []string{"policy_violation account_active"}},
		{"daily total exceeded across accounts", func() contracts.Input {
			in := world("active", 150000)
			priorPayout(&in, "p1", "agent_1", "acc_6", -5*time.Hour, 200000)
			priorPayout(&in, "p2", "agent_1", "acc_5", -3*time.Hour, 200000)
			return in
		}, P, F, []string{"limit_exceeded daily_payout_total"}},
		{"daily total at the max is allowed", func() contracts.Input {
			in := world("active", 100000)
			priorPayout(&in, "p1", "agent_1", "acc_6", -5*time.Hour, 200000)
			priorPayout(&in, "p2", "agent_1", "acc_5", -3*time.Hour, 200000)
			return in
		}, P, P, nil},
		{"yesterday's payouts and other agents' do not count", func() contracts.Input {
			in := world("active", 150000)
			priorPayout(&in, "p1", "agent_1", "acc_6", -25*time.Hour, 400000)
			priorPayout(&in, "p2", "agent_2", "acc_5", -3*time.Hour, 400000)
			return in
		}, P, P, nil},
		{"amount mismatch", func() contracts.Input {
			in := world("active", 100000)
			in.Facts[2].Attrs["amount"] = int64(10000)
			return in
		}, F, P, []string{"effect_differs payout"}},
		{"payout returned after settlement", func() contracts.Input {
			in := world("active", 100000)
			in.Facts = append(in.Facts, fact("ledger", "payout_returned", "account:acc_5", "ledger-9", 30*time.Hour,
				attrs{"payout_id": "po_1", "amount": int64(100000), "currency": usd, "reason": "account closed"}))
			in.Now = t0.Add(31 * time.Hour)
			return in
		}, F, P, []string{"effect_reversed payout"}},
		{"another payout returned", func() contracts.Input {
			in := world("active", 100000)
			in.Facts = append(in.Facts, fact("ledger", "payout_returned", "account:acc_5", "ledger-9", 30*time.Hour, attrs{"payout_id": "po_0"}))
			return in
		}, P, P, nil},
	})
}

func TestSandboxDeployService(t *testing.T) {
	world := func(status, env string) contracts.Input {
		return contracts.Input{
			Action: act("act_7", "deploy_service", "agent_1", "service:svc_api", 0, attrs{"version": "1.4.0", "environment": env}),
			Facts: []commitlayer.Fact{
				fact("platform", "service_registered", "service:svc_api", "platform-1", seeded, attrs{"name": "api", "status": status, "version": "1.3.0", "environment": "production"}),
				fact("platform", "deployed", "service:svc_api", "platform-2", time.Second, attrs{"deployment_id": "dep_1", "version": "1.4.0", "environment": env}),
				fact("platform", "health_reported", "service:svc_api", "platform-3", 2*time.Second, attrs{"status": "healthy", "version": "1.4.0"}),
			},
			Coverage: connected("platform"),
			Now:      t0.Add(20 * time.Minute),
		}
	}
	priorDeploy := func(in *contracts.Input, id, agent string, off time.Duration) {
		in.Prior = append(in.Prior, act(id, "deploy_service", agent, "service:svc_api", off, attrs{"version": "1.3." + id, "environment": "production"}))
		in.Facts = append(in.Facts,
			fact("platform", "deployed", "service:svc_api", "platform-"+id, off+time.Second, attrs{"deployment_id": "dep_" + id, "version": "1.3." + id, "environment": "production"}),
			fact("platform", "health_reported", "service:svc_api", "platform-h"+id, off+2*time.Second, attrs{"status": "healthy", "version": "1.3." + id}))
	}
	runSandboxCases(t, "deploy_service", []sandboxCase{
		{"deployed and healthy", func() contracts.Input { return world("healthy", "production") }, P, P, nil},
		{"degraded service", func() contracts.Input { return world("degraded", "production") }, P, F, []string{"policy_violation service_not_degraded"}},
		{"staging requested", func() contracts.Input { return world("healthy", "staging") }, P, F, []string{"policy_violation production_only"}},
		{"deployed to staging when production was requested", func() contracts.Input {
			in := world("healthy", "production")
			in.Facts[1].Attrs["environment"] = "staging"
			return in
		}, F, F, []string{"effect_differs deployed", "forbidden_effect other_environment"}},
		{"unhealthy after deploy", func() contracts.Input {
			in := world("healthy", "production")
			in.Facts[2].Attrs["status"] = "unhealthy"
			return in
		}, F, F, []string{"missing_effect healthy", "forbidden_effect unhealthy"}},
		{"a fourth deploy in a day, whoever made the others", func() contracts.Input {
			in := world("healthy", "production")
			priorDeploy(&in, "1", "agent_1", -6*time.Hour)
			priorDeploy(&in, "2", "human", -4*time.Hour)
			priorDeploy(&in, "3", "agent_2", -2*time.Hour)
			return in
		}, P, F, []string{"limit_exceeded deploys_per_day"}},
		{"a third deploy in a day is fine", func() contracts.Input {
			in := world("healthy", "production")
			priorDeploy(&in, "1", "agent_1", -6*time.Hour)
			priorDeploy(&in, "2", "human", -4*time.Hour)
			return in
		}, P, P, nil},
		{"rolled back after settlement", func() contracts.Input {
			in := world("healthy", "production")
			in.Facts = append(in.Facts, fact("platform", "rolled_back", "service:svc_api", "platform-9", 3*time.Hour, attrs{"deployment_id": "dep_1", "to_version": "1.3.0"}))
			return in
		}, F, P, []string{"effect_reversed deployed"}},
	})
}

func TestSandboxPlaceTrade(t *testing.T) {
	world := func(status string, quantity int64) contracts.Input {
		params := attrs{"account_id": "acc_5", "side": "buy", "quantity": quantity, "limit_price": int64(1100)}
		return contracts.Input{
			Action: act("act_8", "place_trade", "agent_1", "product:p_acme", 0, params),
			Facts: []commitlayer.Fact{
				fact("broker", "product_listed", "product:p_acme", "broker-1", seeded, attrs{"symbol": "ACME", "status": status, "price": int64(1000), "currency": usd}),
				// Another account trades the same product meanwhile.
				fact("broker", "order_placed", "product:p_acme", "broker-2", 500*time.Millisecond, attrs{"broker_order_id": "bo_0", "account_id": "acc_9", "side": "sell", "quantity": int64(3), "limit_price": int64(900)}),
				fact("broker", "order_filled", "product:p_acme", "broker-3", 600*time.Millisecond, attrs{"fill_id": "f_0", "broker_order_id": "bo_0", "account_id": "acc_9", "side": "sell", "quantity": int64(3), "price": int64(1000), "notional": int64(3000)}),
				fact("broker", "order_placed", "product:p_acme", "broker-4", time.Second, attrs{"broker_order_id": "bo_1", "account_id": "acc_5", "side": "buy", "quantity": quantity, "limit_price": int64(1100)}),
				fact("broker", "order_filled", "product:p_acme", "broker-5", 2*time.Second, attrs{"fill_id": "f_1", "broker_order_id": "bo_1", "account_id": "acc_5", "side": "buy", "quantity": quantity, "price": int64(1000), "notional": quantity * 1000}),
			},
			Coverage: connected("broker"),
			Now:      t0.Add(20 * time.Minute),
		}
	}
	priorTrade := func(in *contracts.Input, id, product string, off time.Duration, notional int64) {
		in.Prior = append(in.Prior, act(id, "place_trade", "agent_1", "product:"+product, off, attrs{"account_id": "acc_5", "side": "buy", "quantity": int64(1), "limit_price": notional}))
		in.Facts = append(in.Facts, fact("broker", "order_filled", "product:"+product, "broker-"+id, off+time.Second,
			attrs{"fill_id": "f_" + id, "account_id": "acc_5", "side": "buy", "quantity": int64(1), "price": notional, "notional": notional}))
	}
	runSandboxCases(t, "place_trade", []sandboxCase{
		{"placed and filled", func() contracts.Input { return world("trading", 10) }, P, P, nil},
		{"halted product", func() contracts.Input { return world("halted", 10) }, P, F, []string{"policy_violation product_trading"}},
		{"quantity over 1000", func() contracts.Input { return world("trading", 2000) }, P, F, []string{"policy_violation quantity"}},
		{"not filled", func() contracts.Input {
			in := world("trading", 10)
			in.Facts = without(in.Facts, "broker-5")
			return in
		}, F, P, []string{"missing_effect filled"}},
		{"quantity rewritten", func() contracts.Input {
			in := world("trading", 10)
			in.Facts[3].Attrs["quantity"] = int64(100)
			in.Facts[4].Attrs["quantity"] = int64(100)
			return in
		}, F, P, []string{"effect_differs placed", "effect_differs filled"}},
		{"fill busted after settlement", func() contracts.Input {
			in := world("trading", 10)
			in.Facts = append(in.Facts,
				fact("broker", "fill_busted", "product:p_acme", "broker-9", 20*time.Hour, attrs{"fill_id": "f_0", "reason": "other account's fill"}),
				fact("broker", "fill_busted", "product:p_acme", "broker-10", 30*time.Hour, attrs{"fill_id": "f_1", "reason": "erroneous"}))
			return in
		}, F, P, []string{"effect_reversed filled"}},
		{"daily notional exceeded", func() contracts.Input {
			in := world("trading", 10)
			priorTrade(&in, "t1", "p_other", -10*time.Hour, 6_000_000)
			priorTrade(&in, "t2", "p_more", -time.Hour, 4_000_000)
			return in
		}, P, F, []string{"limit_exceeded daily_notional"}},
		{"daily notional at the max", func() contracts.Input {
			in := world("trading", 10)
			priorTrade(&in, "t1", "p_other", -10*time.Hour, 6_000_000)
			priorTrade(&in, "t2", "p_more", -time.Hour, 3_990_000)
			return in
		}, P, P, nil},
	})
}
