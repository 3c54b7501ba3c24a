package contracts_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// refundSrc is the engine's main test contract: every kind of check, with a
// limit per agent.
const refundSrc = `
id: refund
subject: order
settlement: 10m
watch: 72h
sources: [payments, orders, tickets]
policy:
  - id: eligible
    rule: state.orders.status in ['paid', 'shipped']
    message: order must be paid or shipped
  - id: within_limit
    rule: params.amount <= 50000 && params.amount <= state.orders.total
limits:
  - id: daily_total
    per: agent
    window: 24h
    effect: refund
    sum: effect.amount
    max: 64000
effects:
  - id: refund
    source: payments
    type: refund_created
    count: 1
    expect: effect.amount == params.amount
    reversed_by: {source: payments, type: refund_reversed, where: effect.refund_id == original.refund_id}
  - id: order_refunded
    source: orders
    type: order_status_changed
    where: effect.status == 'refunded'
  - id: customer_notified
    source: tickets
    type: note_added
forbids:
  - id: no_cancellation
    source: orders
    type: order_status_changed
    where: effect.status == 'cancelled'
`

var allSources = []string{"payments", "orders", "tickets"}

// refundWorld is a refund that went right: the order o_1 of customer c_1 is
// paid, ticket t_1 is about it, and after the action at t0 come the refund,
// the status change and a note on the ticket.
func refundWorld() contracts.Input {
	return contracts.Input{
		Action: act("a_1", "refund", "bot", "order:o_1", 0, attrs{"amount": int64(2500), "currency": "USD"}),
		Facts: []commitlayer.Fact{
			fact("orders", "order_created", "order:o_1", "oc_1", -2*time.Hour,
				attrs{"customer_id": "c_1", "status": "paid", "total": int64(5000), "currency": "USD"}, "customer:c_1"),
			fact("payments", "charge_captured", "order:o_1", "ch_1", -2*time.Hour, attrs{"amount": int64(5000)}),
			fact("tickets", "ticket_opened", "ticket:t_1", "to_1", -time.Hour, attrs{"status": "open"}, "order:o_1", "customer:c_1"),
			fact("payments", "refund_created", "order:o_1", "re_1", time.Minute, attrs{"refund_id": "re_1", "amount": int64(2500)}),
			fact("orders", "order_status_changed", "order:o_1", "os_1", 2*time.Minute, attrs{"status": "refunded", "previous": "paid"}),
			fact("tickets", "note_added", "ticket:t_1", "n_1", 3*time.Minute, attrs{"body": "refunded"}, "order:o_1", "customer:c_1"),
			// Unrelated tenants' noise.
			fact("orders", "order_created", "order:o_9", "oc_9", -3*time.Hour, attrs{"status": "cancelled"}, "customer:c_9"),
			fact("payments", "refund_created", "order:o_9", "re_9", time.Minute, attrs{"refund_id": "re_9", "amount": int64(1)}),
			fact("orders", "order_status_changed", "order:o_9", "os_9", 5*time.Minute, attrs{"status": "cancelled"}),
		},
		Coverage: connected(allSources...),
		Now:      t0.Add(15 * time.Minute),
	}
}

func TestEvaluateRefund(t *testing.T) {
	c := mustParse(t, refundSrc)
	P, F, U := commitlayer.StatusPass, commitlayer.StatusFail, commitlayer.StatusUnknown
	cases := []struct {
		name            string
		change          func(in *contracts.Input)
		outcome, policy commitlayer.Status
		findings        []string
	}{
		{"everything happened", func(in *contracts.Input) {}, P, P, nil},
		{"effects on unrelated subjects do not count", func(in *contracts.Input) {
			in.Facts = without(in.Facts, "re_1", "os_1", "n_1")
		}, F, P, []string{"missing_effect refund", "missing_effect order_refunded", "missing_effect customer_notified"}},
		{"one effect missing", func(in *contracts.Input) {
			in.Facts = without(in.Facts, "os_1")
		}, F, P, []string{"missing_effect order_refunded"}},
		{"duplicate refund (retry without idempotency key)", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1", "re_2", 4*time.Minute, attrs{"refund_id": "re_2", "amount": int64(2500)}))
		}, F, P, []string{"duplicate_effect refund"}},
		{"duplicate inside the watch window counts", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1", "re_2", 70*time.Hour, attrs{"refund_id": "re_2", "amount": int64(2500)}))
		}, F, P, []string{"duplicate_effect refund"}},
		{"a refund after the watch window is not this action's", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1", "re_2", 73*time.Hour, attrs{"refund_id": "re_2", "amount": int64(2500)}))
		}, P, P, nil},
		{"a refund before the action is not its effect", func(in *contracts.Input) {
			in.Facts = without(in.Facts, "re_1")
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1", "re_0", -time.Second, attrs{"refund_id": "re_0", "amount": int64(2500)}))
		}, F, P, []string{"missing_effect refund"}},
		{"amount differs", func(in *contracts.Input) {
			in.Facts[3].Attrs = attrs{"refund_id": "re_1", "amount": int64(2600)}
		}, F, P, []string{"effect_differs refund"}},
		{"amount missing on the fact: the expect and the limit's sum both fail", func(in *contracts.Input) {
			in.Facts[3].Attrs = attrs{"refund_id": "re_1"}
		}, F, F, []string{"effect_differs refund", "policy_violation daily_total"}},
		{"reversed after settlement", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_1", 30*time.Hour, attrs{"refund_id": "re_1"}))
			in.Now = t0.Add(31 * time.Hour)
		}, F, P, []string{"effect_reversed refund"}},
		{"reversal long after the watch still counts", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_1", 300*time.Hour, attrs{"refund_id": "re_1"}))
		}, F, P, []string{"effect_reversed refund"}},
		{"reversal of another refund does not count", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_1", 30*time.Hour, attrs{"refund_id": "re_other"}))
		}, P, P, nil},
		{"reversal before the effect does not count", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_1", 30*time.Second, attrs{"refund_id": "re_1"}))
		}, P, P, nil},
		{"reversal without the attr its where reads does not count", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_1", 30*time.Hour, attrs{}))
		}, P, P, nil},
		{"order not eligible: the refund happened, policy fails", func(in *contracts.Input) {
			in.Facts[0].Attrs = attrs{"status": "pending", "total": int64(5000)}
		}, P, F, []string{"policy_violation eligible"}},
		{"over the per-refund limit", func(in *contracts.Input) {
			in.Action.Params["amount"] = int64(6000)
			in.Facts[3].Attrs["amount"] = int64(6000)
		}, P, F, []string{"policy_violation within_limit"}},
		{"state attr missing", func(in *contracts.Input) {
			in.Facts[0].Attrs = attrs{"status": "paid"}
		}, P, F, []string{"policy_violation within_limit"}},
		{"param missing", func(in *contracts.Input) {
			in.Action.Params = attrs{}
			in.Facts[3].Attrs = attrs{"refund_id": "re_1", "amount": int64(2500)}
		}, F, F, []string{"effect_differs refund", "policy_violation within_limit"}},
		{"no facts about the subject at all", func(in *contracts.Input) {
			in.Facts = nil
		}, F, F, []string{"missing_effect refund", "missing_effect order_refunded", "missing_effect customer_notified",
			"policy_violation eligible", "policy_violation within_limit"}},
		{"status changes after the action do not change the pre-action state", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("orders", "order_status_changed", "order:o_1", "os_x", time.Second, attrs{"status": "pending"}))
		}, P, P, nil},
		{"status changes before the action fold into the state", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("orders", "order_status_changed", "order:o_1", "os_x", -time.Second, attrs{"status": "pending"}))
		}, P, F, []string{"policy_violation eligible"}},
		{"forbidden cancellation after the action", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("orders", "order_status_changed", "order:o_1", "os_c", 5*time.Minute, attrs{"status": "cancelled"}))
		}, P, F, []string{"forbidden_effect no_cancellation"}},
		{"cancellation before the action is not forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("orders", "order_status_changed", "order:o_1", "os_c", -5*time.Minute, attrs{"status": "paid"}),
				fact("orders", "order_status_changed", "order:o_1", "os_d", -6*time.Minute, attrs{"status": "cancelled"}))
		}, P, P, nil},
		{"wrong subject type (the ticket links to the order, so its facts match)", func(in *contracts.Input) {
			in.Action.Subject = "ticket:t_1"
		}, P, F, []string{"policy_violation subject"}},
		{"payments never reported", func(in *contracts.Input) {
			in.Facts = without(in.Facts, "re_1", "ch_1", "re_9")
			in.Coverage = connected("orders", "tickets")
		}, U, U, []string{"source_unavailable refund", "source_unavailable daily_total"}},
		{"payments unreachable for this verification", func(in *contracts.Input) {
			in.Coverage.Unreachable = map[string]string{"payments": "dial tcp: connection refused"}
		}, U, U, []string{"source_unavailable refund", "source_unavailable daily_total"}},
		{"unreachable source: duplicates already stored still FAIL", func(in *contracts.Input) {
			in.Coverage.Unreachable = map[string]string{"payments": "timeout"}
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1", "re_2", 4*time.Minute, attrs{"refund_id": "re_2", "amount": int64(2500)}))
		}, F, U, []string{"duplicate_effect refund", "source_unavailable daily_total"}},
		{"unreachable source: a connected source proves FAIL", func(in *contracts.Input) {
			in.Coverage.Unreachable = map[string]string{"payments": "timeout"}
			in.Facts = without(in.Facts, "re_1", "os_1")
		}, F, U, []string{"source_unavailable refund", "missing_effect order_refunded", "source_unavailable daily_total"}},
		{"orders never reported: policy UNKNOWN, not violated", func(in *contracts.Input) {
			in.Facts = without(in.Facts, "oc_1", "os_1", "oc_9", "os_9")
			in.Coverage = connected("payments", "tickets")
		}, U, U, []string{"source_unavailable order_refunded", "source_unavailable eligible", "source_unavailable within_limit",
			"source_unavailable no_cancellation"}},
		{"orders unreachable but its stored state proves ineligible", func(in *contracts.Input) {
			in.Facts[0].Attrs["status"] = "pending"
			in.Coverage.Unreachable = map[string]string{"orders": "500"}
		}, U, F, []string{"source_unavailable order_refunded", "policy_violation eligible", "source_unavailable within_limit",
			"source_unavailable no_cancellation"}},
		{"orders unreachable and a stored cancellation is forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("orders", "order_status_changed", "order:o_1", "os_c", 5*time.Minute, attrs{"status": "cancelled"}))
			in.Coverage.Unreachable = map[string]string{"orders": "500"}
		}, U, F, []string{"source_unavailable order_refunded", "source_unavailable eligible", "source_unavailable within_limit",
			"forbidden_effect no_cancellation"}},
		{"note on a ticket linked from the order side counts", func(in *contracts.Input) {
			// The ticket's facts carry no links; the order's fact names the ticket.
			in.Facts = without(in.Facts, "to_1", "n_1")
			in.Facts = append(in.Facts,
				fact("orders", "order_updated", "order:o_1", "ou_1", -30*time.Minute, attrs{}, "ticket:t_2"),
				fact("tickets", "note_added", "ticket:t_2", "n_2", 3*time.Minute, attrs{}))
		}, P, P, nil},
		{"note on an unlinked ticket does not count", func(in *contracts.Input) {
			in.Facts = without(in.Facts, "n_1")
			in.Facts = append(in.Facts, fact("tickets", "note_added", "ticket:t_5", "n_5", 3*time.Minute, attrs{}, "order:o_5"))
		}, F, P, []string{"missing_effect customer_notified"}},
		{"links are one hop: another order of the same customer does not count", func(in *contracts.Input) {
			in.Facts = without(in.Facts, "re_1")
			in.Facts = append(in.Facts,
				fact("orders", "order_created", "order:o_2", "oc_2", -time.Hour, attrs{"status": "paid"}, "customer:c_1"),
				fact("payments", "refund_created", "order:o_2", "re_2", time.Minute, attrs{"refund_id": "re_2", "amount": int64(2500)}))
		}, F, P, []string{"missing_effect refund"}},
		{"where cannot be evaluated on a candidate", func(in *contracts.Input) {
			in.Facts[4].Attrs = attrs{"previous": "paid"}
		}, F, P, []string{"missing_effect order_refunded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := refundWorld()
			tc.change(&in)
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

func TestEvaluateMessages(t *testing.T) {
	c := mustParse(t, refundSrc)
	cases := []struct {
		name    string
		change  func(in *contracts.Input)
		code    commitlayer.Code
		check   string
		message string
		facts   []string
	}{
		{"differs names the values", func(in *contracts.Input) { in.Facts[3].Attrs["amount"] = int64(2600) },
			commitlayer.CodeEffectDiffers, "refund",
			"refund: fact re_1 differs from the request: effect.amount == params.amount is false (effect.amount=2600, params.amount=2500)",
			[]string{"re_1"}},
		{"differs names the missing attr", func(in *contracts.Input) { delete(in.Facts[3].Attrs, "amount") },
			commitlayer.CodeEffectDiffers, "refund",
			"refund: fact re_1: expect effect.amount == params.amount could not be evaluated: no such key: amount",
			[]string{"re_1"}},
		{"policy message and missing key", func(in *contracts.Input) { delete(in.Facts[0].Attrs, "status") },
			commitlayer.CodePolicyViolation, "eligible",
			"eligible: order must be paid or shipped; rule state.orders.status in ['paid', 'shipped'] could not be evaluated: no such key: status",
			[]string{}},
		{"policy false without a message shows the rule", func(in *contracts.Input) { in.Action.Params["amount"] = int64(60000) },
			commitlayer.CodePolicyViolation, "within_limit",
			"within_limit: rule params.amount <= 50000 && params.amount <= state.orders.total is false",
			[]string{}},
		{"missing effect explains unevaluable candidates", func(in *contracts.Input) { in.Facts[4].Attrs = attrs{} },
			commitlayer.CodeMissingEffect, "order_refunded",
			"order_refunded: no orders order_status_changed fact on order:o_1 or its linked subjects from 2026-11-29T10:00:00Z to 2026-12-02T10:10:00Z where effect.status == 'refunded'; 1 candidate fact could not be evaluated: no such key: status",
			[]string{"os_1"}},
		{"duplicate lists the facts in time order", func(in *contracts.Input) {
			in.Facts = append([]commitlayer.Fact{fact("payments", "refund_created", "order:o_1", "re_2", 4*time.Minute, attrs{"refund_id": "re_2", "amount": int64(2500)})}, in.Facts...)
		},
			commitlayer.CodeDuplicateEffect, "refund", "refund: 2 payments refund_created facts where at most 1 was expected",
			[]string{"re_1", "re_2"}},
		{"reversal lists the effect then the reversal", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_1", 30*time.Hour, attrs{"refund_id": "re_1"}))
		},
			commitlayer.CodeEffectReversed, "refund", "refund: fact re_1 was reversed by payments refund_reversed rr_1",
			[]string{"re_1", "rr_1"}},
		{"unreachable source", func(in *contracts.Input) {
			in.Coverage.Unreachable = map[string]string{"tickets": "boom"}
		},
			commitlayer.CodeSourceUnavailable, "customer_notified",
			"customer_notified: cannot be verified: tickets is unreachable for this verification", []string{}},
		{"never reported source", func(in *contracts.Input) { in.Coverage = connected("payments", "orders") },
			commitlayer.CodeSourceUnavailable, "customer_notified",
			"customer_notified: cannot be verified: tickets has never reported", []string{}},
		{"subject type", func(in *contracts.Input) { in.Action.Subject = "ticket:t_1" },
			commitlayer.CodePolicyViolation, "subject",
			`subject: subject type: the action's subject "ticket:t_1" is of type "ticket"; the contract is for "order"`, []string{}},
		{"forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("orders", "order_status_changed", "order:o_1", "os_c", 5*time.Minute, attrs{"status": "cancelled"}))
		},
			commitlayer.CodeForbiddenEffect, "no_cancellation",
			"no_cancellation: 1 forbidden orders order_status_changed where effect.status == 'cancelled' fact after the action",
			[]string{"os_c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := refundWorld()
			tc.change(&in)
			v := c.Evaluate(in)
			f := finding(t, v, tc.code, tc.check)
			require.Equal(t, tc.message, f.Message)
			require.Equal(t, tc.facts, f.Facts)
		})
	}
}

func TestEvaluateVerdictFields(t *testing.T) {
	c := mustParse(t, refundSrc)
	cases := []struct {
		name         string
		now          time.Duration
		claim        string
		drop         []string
		provisional  bool
		contradicted bool
	}{
		{"before settlement is provisional", 9 * time.Minute, commitlayer.ClaimSuccess, nil, true, false},
		{"at settlement is final", 10 * time.Minute, commitlayer.ClaimSuccess, nil, false, false},
		{"success claimed, outcome FAIL", 15 * time.Minute, commitlayer.ClaimSuccess, []string{"re_1"}, false, true},
		{"failure claimed, outcome PASS", 15 * time.Minute, commitlayer.ClaimFailure, nil, false, true},
		{"failure claimed, outcome FAIL", 15 * time.Minute, commitlayer.ClaimFailure, []string{"re_1"}, false, false},
		{"other claims are never contradicted", 15 * time.Minute, "partial", []string{"re_1"}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := refundWorld()
			in.Now = t0.Add(tc.now)
			in.Action.Claim.Status = tc.claim
			in.Facts = without(in.Facts, tc.drop...)
			v := c.Evaluate(in)
			require.Equal(t, tc.provisional, v.Provisional)
			require.Equal(t, tc.contradicted, v.ClaimContradicted)
			require.Equal(t, "a_1", v.ActionID)
			require.Equal(t, "refund", v.Contract)
			require.Equal(t, in.Now, v.EvaluatedAt)
			require.Equal(t, t0.Add(10*time.Minute), v.SettlesAt)
			require.Zero(t, v.Version)
		})
	}
	t.Run("unavailable sources are sorted and never null", func(t *testing.T) {
		in := refundWorld()
		in.Coverage = contracts.Coverage{Connected: []string{"orders"}, Unreachable: map[string]string{"orders": "x"}}
		v := c.Evaluate(in)
		require.Equal(t, []string{"orders", "payments", "tickets"}, v.UnavailableSources)
		in.Coverage = connected(allSources...)
		b, err := json.Marshal(c.Evaluate(in))
		require.NoError(t, err)
		require.Contains(t, string(b), `"findings":[]`)
		require.Contains(t, string(b), `"unavailable_sources":[]`)
	})
	t.Run("same input, same verdict", func(t *testing.T) {
		in := refundWorld()
		in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1", "re_2", 4*time.Minute, attrs{"refund_id": "re_2", "amount": int64(1)}))
		v1 := c.Evaluate(in)
		slices.Reverse(in.Facts)
		v2 := c.Evaluate(in)
		require.Equal(t, v1, v2)
		require.True(t, v1.SameAnswer(v2))
	})
}

func TestEvaluateLimits(t *testing.T) {
	c := mustParse(t, refundSrc)
	// prior builds an earlier refund action by agent on subject at t0+off
	// and its refund fact of amount.
	prior := func(in *contracts.Input, id, agent, subject string, off time.Duration, amount int64) {
		in.Prior = append(in.Prior, act(id, "refund", agent, subject, off, attrs{"amount": amount}))
		in.Facts = append(in.Facts, fact("payments", "refund_created", subject, "re_"+id, off+time.Minute, attrs{"refund_id": "re_" + id, "amount": amount}))
	}
	cases := []struct {
		name   string
		change func(in *contracts.Input)
		exceed bool
		facts  []string // the counted facts, when exceeded
	}{
		{"alone, under the max", func(in *contracts.Input) {}, false, nil},
		{"same agent, in the window, over the max", func(in *contracts.Input) {
			prior(in, "p1", "bot", "order:o_2", -time.Hour, 62000)
		}, true, []string{"re_p1", "re_1"}},
		{"same agent, at the window's start edge: counted", func(in *contracts.Input) {
			prior(in, "p1", "bot", "order:o_2", -24*time.Hour, 62000)
		}, true, []string{"re_p1", "re_1"}},
		{"same agent, a second before the window: not counted", func(in *contracts.Input) {
			prior(in, "p1", "bot", "order:o_2", -24*time.Hour-time.Second, 62000)
		}, false, nil},
		{"a later action is not prior", func(in *contracts.Input) {
			prior(in, "p1", "bot", "order:o_2", time.Second, 62000)
		}, false, nil},
		{"another agent's actions do not count per agent", func(in *contracts.Input) {
			prior(in, "p1", "human", "order:o_2", -time.Hour, 62000)
		}, false, nil},
		{"another contract's actions do not count", func(in *contracts.Input) {
			prior(in, "p1", "bot", "order:o_2", -time.Hour, 62000)
			in.Prior[0].Contract = "payout"
		}, false, nil},
		{"the action itself listed as prior is not counted twice", func(in *contracts.Input) {
			in.Prior = append(in.Prior, in.Action, in.Action)
			in.Action.Params["amount"] = int64(2500)
		}, false, nil},
		{"a prior listed twice is counted once", func(in *contracts.Input) {
			prior(in, "p1", "bot", "order:o_2", -time.Hour, 31000)
			in.Prior = append(in.Prior, in.Prior[0])
		}, false, nil},
		{"several priors add up", func(in *contracts.Input) {
			prior(in, "p1", "bot", "order:o_2", -3*time.Hour, 31000)
			prior(in, "p2", "bot", "order:o_3", -2*time.Hour, 31000)
		}, true, []string{"re_p1", "re_p2", "re_1"}},
		{"a fact shared by two actions is counted once", func(in *contracts.Input) {
			// p1 on the same order an hour ago refunded 60000; re_1 (2500)
			// falls in both actions' windows: 62500, not 65000.
			prior(in, "p1", "bot", "order:o_1", -time.Hour, 60000)
		}, false, nil},
		{"a fact shared by two actions, over the max once", func(in *contracts.Input) {
			prior(in, "p1", "bot", "order:o_1", -time.Hour, 62000)
		}, true, []string{"re_p1", "re_1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := refundWorld()
			tc.change(&in)
			v := c.Evaluate(in)
			requireConsistent(t, v)
			if !tc.exceed {
				require.NotContains(t, got(v), "limit_exceeded daily_total")
				return
			}
			f := finding(t, v, commitlayer.CodeLimitExceeded, "daily_total")
			require.Equal(t, commitlayer.LensPolicy, f.Lens)
			require.Equal(t, tc.facts, f.Facts)
			require.Equal(t, commitlayer.StatusFail, v.Lenses.Policy)
		})
	}
	t.Run("the message gives total, window, who and max", func(t *testing.T) {
		in := refundWorld()
		prior(&in, "p1", "bot", "order:o_2", -time.Hour, 62000)
		f := finding(t, c.Evaluate(in), commitlayer.CodeLimitExceeded, "daily_total")
		require.Equal(t, "daily_total: sum of effect.amount is 64500 over 1d for agent bot (2 actions), more than the max 64000", f.Message)
	})
	t.Run("a fact whose amount cannot be summed fails the limit", func(t *testing.T) {
		in := refundWorld()
		prior(&in, "p1", "bot", "order:o_2", -time.Hour, 1)
		delete(in.Facts[len(in.Facts)-1].Attrs, "amount")
		v := c.Evaluate(in)
		f := finding(t, v, commitlayer.CodePolicyViolation, "daily_total")
		require.Equal(t, []string{"re_p1"}, f.Facts)
		require.Contains(t, f.Message, "no such key: amount")
	})
}

func TestEvaluateLimitPerSubjectCount(t *testing.T) {
	c := mustParse(t, `
id: deploy
settlement: 10m
sources: [platform]
limits:
  - {id: per_day, per: subject, window: 24h, effect: deployed, count: true, max: 2}
effects:
  - {id: deployed, source: platform, type: deployed}
`)
	in := contracts.Input{
		Action:   act("d3", "deploy", "bot", "service:api", 0, attrs{}),
		Coverage: connected("platform"),
		Now:      t0.Add(time.Hour),
		Facts:    []commitlayer.Fact{fact("platform", "deployed", "service:api", "dep3", time.Minute, attrs{})},
	}
	for i, who := range []string{"bot", "human"} { // per subject: any agent counts
		id := []string{"d1", "d2"}[i]
		in.Prior = append(in.Prior, act(id, "deploy", who, "service:api", -time.Duration(i+1)*time.Hour, attrs{}))
		in.Facts = append(in.Facts, fact("platform", "deployed", "service:api", "dep"+id[1:], -time.Duration(i+1)*time.Hour+time.Minute, attrs{}))
	}
	// Another service's deploys do not count.
	in.Prior = append(in.Prior, act("x1", "deploy", "bot", "service:web", -time.Hour, attrs{}))
	in.Facts = append(in.Facts, fact("platform", "deployed", "service:web", "depx", -time.Hour+time.Minute, attrs{}))

	v := c.Evaluate(in)
	requireConsistent(t, v)
	f := finding(t, v, commitlayer.CodeLimitExceeded, "per_day")
	require.Equal(t, []string{"dep2", "dep1", "dep3"}, f.Facts)
	require.Equal(t, "per_day: count of deployed is 3 over 1d for subject service:api (3 actions), more than the max 2", f.Message)

	in.Prior = in.Prior[1:]
	require.Equal(t, []string{}, got(c.Evaluate(in)))
}

func TestEvaluateOutcomeContract(t *testing.T) {
	c := mustParse(t, `
id: vendor_resolved
kind: outcome
settlement: 1h
sources: [tickets, crm]
effects:
  - {id: closed, source: tickets, type: ticket_status_changed, where: "effect.status == 'closed'"}
  - {id: survey, source: crm, type: survey_sent}
`)
	base := contracts.Input{
		Action:   act("o1", "vendor_resolved", "vendor", "ticket:t_1", 0, attrs{}),
		Coverage: connected("tickets", "crm"),
		Now:      t0.Add(2 * time.Hour),
	}
	cases := []struct {
		name     string
		facts    []commitlayer.Fact
		outcome  commitlayer.Status
		findings []string
	}{
		{"no signal at all is UNKNOWN", nil, commitlayer.StatusUnknown, []string{"no_signal effects"}},
		{"facts only before the action are no signal", []commitlayer.Fact{
			fact("tickets", "ticket_status_changed", "ticket:t_1", "s0", -time.Minute, attrs{"status": "closed"}),
		}, commitlayer.StatusUnknown, []string{"no_signal effects"}},
		{"a signal that does not match is a FAIL", []commitlayer.Fact{
			fact("tickets", "ticket_status_changed", "ticket:t_1", "s1", time.Minute, attrs{"status": "pending"}),
		}, commitlayer.StatusFail, []string{"missing_effect closed", "missing_effect survey"}},
		{"one effect seen, the other missing", []commitlayer.Fact{
			fact("tickets", "ticket_status_changed", "ticket:t_1", "s1", time.Minute, attrs{"status": "closed"}),
		}, commitlayer.StatusFail, []string{"missing_effect survey"}},
		{"all seen", []commitlayer.Fact{
			fact("tickets", "ticket_status_changed", "ticket:t_1", "s1", time.Minute, attrs{"status": "closed"}),
			fact("crm", "survey_sent", "ticket:t_1", "sv", time.Minute, attrs{}),
		}, commitlayer.StatusPass, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			in.Facts = tc.facts
			v := c.Evaluate(in)
			requireConsistent(t, v)
			require.Equal(t, tc.findings, got(v))
			require.Equal(t, tc.outcome, v.Lenses.Outcome)
			require.Equal(t, commitlayer.StatusPass, v.Lenses.Policy)
		})
	}
	t.Run("the same contract as an action contract fails instead", func(t *testing.T) {
		a := mustParse(t, `
id: vendor_resolved
settlement: 1h
sources: [tickets, crm]
effects:
  - {id: closed, source: tickets, type: ticket_status_changed}
  - {id: survey, source: crm, type: survey_sent}
`)
		v := a.Evaluate(base)
		require.Equal(t, []string{"missing_effect closed", "missing_effect survey"}, got(v))
		require.Equal(t, commitlayer.StatusFail, v.Status)
	})
}

func TestEvaluateState(t *testing.T) {
	c := mustParse(t, `
id: cancel
settlement: 10m
sources: [crm, billing]
policy:
  - {id: active, rule: "state.crm.status == 'active'"}
  - {id: billing_known, rule: "state.billing.size() == 0"}
  - {id: tier, rule: "state.crm.tier == 'gold'"}
`)
	base := func() contracts.Input {
		return contracts.Input{
			Action:   act("c1", "cancel", "bot", "subscription:s_1", 0, attrs{}),
			Coverage: connected("crm", "billing"),
			Now:      t0.Add(time.Hour),
			Facts: []commitlayer.Fact{
				fact("crm", "subscription_created", "subscription:s_1", "sc", -2*time.Hour, attrs{"status": "active"}, "customer:c_1"),
				// The linked customer's later fact does not override the
				// subscription's own status, but adds its tier.
				fact("crm", "customer_updated", "customer:c_1", "cu", -time.Hour, attrs{"status": "suspended", "tier": "gold"}),
			},
		}
	}
	t.Run("own subject wins over linked; every source is present", func(t *testing.T) {
		v := c.Evaluate(base())
		require.Equal(t, []string{}, got(v))
	})
	t.Run("a later own fact overrides", func(t *testing.T) {
		in := base()
		in.Facts = append(in.Facts, fact("crm", "subscription_status_changed", "subscription:s_1", "ss", -time.Minute, attrs{"status": "paused"}))
		require.Equal(t, []string{"policy_violation active"}, got(c.Evaluate(in)))
	})
	t.Run("equal times fold in seq order", func(t *testing.T) {
		in := base()
		a := fact("crm", "subscription_status_changed", "subscription:s_1", "z", -time.Minute, attrs{"status": "paused"})
		b := fact("crm", "subscription_status_changed", "subscription:s_1", "a", -time.Minute, attrs{"status": "active"})
		a.Seq, b.Seq = 1, 2
		in.Facts = append(in.Facts, a, b)
		require.Equal(t, []string{}, got(c.Evaluate(in)))
		a.Seq, b.Seq = 2, 1
		in.Facts = append(base().Facts, a, b)
		require.Equal(t, []string{"policy_violation active"}, got(c.Evaluate(in)))
	})
	t.Run("a missing attr is no such key, not a missing source", func(t *testing.T) {
		in := base()
		in.Facts = in.Facts[:1]
		v := c.Evaluate(in)
		f := finding(t, v, commitlayer.CodePolicyViolation, "tier")
		require.Contains(t, f.Message, "no such key: tier")
	})
	t.Run("a dynamic state read depends on every source", func(t *testing.T) {
		d := mustParse(t, `
id: dyn
settlement: 10m
sources: [crm, billing]
policy:
  - {id: any, rule: "state['crm'].status == 'active'"}
  - {id: fixed, rule: "state.crm.status == 'active'"}
  - {id: params_only, rule: "params.size() == 0"}
`)
		in := base()
		in.Coverage = connected("crm")
		require.Equal(t, []string{"source_unavailable any"}, got(d.Evaluate(in)))
	})
	t.Run("a non-bool result fails the rule and says so", func(t *testing.T) {
		d := mustParse(t, `
id: dyn
settlement: 10m
sources: [crm]
policy:
  - {id: flag, rule: params.flag}
`)
		in := base()
		in.Action.Params = attrs{"flag": "yes"}
		f := finding(t, d.Evaluate(in), commitlayer.CodePolicyViolation, "flag")
		require.Equal(t, "flag: rule params.flag could not be evaluated: result is string, not a bool", f.Message)
		in.Action.Params = attrs{"flag": true}
		require.Equal(t, []string{}, got(d.Evaluate(in)))
	})
	t.Run("action variables", func(t *testing.T) {
		d := mustParse(t, `
id: act
settlement: 10m
sources: [crm]
policy:
  - id: vars
    rule: >-
      action.id == 'c1' && action.agent == 'bot' && action.subject == 'subscription:s_1' &&
      action.subject_type == 'subscription' && action.subject_id == 's_1' &&
      action.requested_at == timestamp('2026-11-29T10:00:00Z') && action.claim_status == 'success'
  - id: effect_meta
    rule: "true"
effects:
  - id: e
    source: crm
    type: note
    where: >-
      effect._type == 'note' && effect._subject == 'customer:c_1' &&
      effect._occurred_at > action.requested_at && effect.n == 1.5
`)
		in := base()
		in.Facts = append(in.Facts, fact("crm", "note", "customer:c_1", "n", time.Minute, attrs{"n": 1.5}))
		require.Equal(t, []string{}, got(d.Evaluate(in)))
	})
}

func TestEvaluateDesignExample(t *testing.T) {
	// DESIGN.md's example contract, verbatim: a 2500 refund exceeds its
	// daily max of 2000.
	c := load(t, "testdata/design_example.yaml")
	in := refundWorld()
	in.Action.Contract = "refund_customer"
	v := c.Evaluate(in)
	requireConsistent(t, v)
	require.Equal(t, []string{"limit_exceeded daily_refund_total"}, got(v))
	in.Action.Params["amount"] = int64(1500)
	in.Facts[3].Attrs["amount"] = int64(1500)
	require.Equal(t, []string{}, got(c.Evaluate(in)))
}

func TestEvaluateConcurrent(t *testing.T) {
	c := mustParse(t, refundSrc)
	want := c.Evaluate(refundWorld())
	done := make(chan commitlayer.Verdict)
	for range 8 {
		go func() { done <- c.Evaluate(refundWorld()) }()
	}
	for range 8 {
		require.Equal(t, want, <-done)
	}
}
