package contracts_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// throughSrc cancels a subscription; refunding any order of the
// subscription's customer in the window is forbidden. Orders are two hops
// from the subscription (subscription -> customer -> order).
const throughSrc = `
id: cancel
subject: subscription
settlement: 10m
watch: 72h
sources: [crm, payments]
effects:
  - id: cancelled
    source: crm
    type: subscription_status_changed
    where: effect.status == 'cancelled'
    count: 1
forbids:
  - id: no_refund
    source: payments
    type: refund_created
    where: effect.amount > 0
    through: customer
`

// throughWorld: subscription s_1 of customer c_1 is cancelled at t0+1m.
// Customer c_1 has orders o_1 (linked from the order) and o_3 (linked from
// the customer's own fact); customer c_2 has order o_2. A ticket t_1 about
// the subscription links it and the customer.
func throughWorld() contracts.Input {
	return contracts.Input{
		Action: act("a_1", "cancel", "bot", "subscription:s_1", 0, attrs{}),
		Facts: []commitlayer.Fact{
			fact("crm", "customer_created", "customer:c_1", "cc_1", -3*time.Hour, attrs{"tier": "gold"}),
			fact("crm", "subscription_created", "subscription:s_1", "sc_1", -2*time.Hour, attrs{"status": "active"}, "customer:c_1"),
			fact("orders", "order_created", "order:o_1", "oc_1", -2*time.Hour, attrs{"status": "paid"}, "customer:c_1"),
			fact("crm", "customer_updated", "customer:c_1", "cu_1", -90*time.Minute, attrs{"tier": "gold"}, "order:o_3"),
			fact("orders", "order_created", "order:o_2", "oc_2", -2*time.Hour, attrs{"status": "paid"}, "customer:c_2"),
			fact("tickets", "ticket_opened", "ticket:t_1", "to_1", -time.Hour, attrs{"status": "open"}, "subscription:s_1", "customer:c_1"),
			fact("crm", "subscription_status_changed", "subscription:s_1", "ss_1", time.Minute, attrs{"status": "cancelled"}, "customer:c_1"),
		},
		Coverage: connected("crm", "payments"),
		Now:      t0.Add(20 * time.Minute),
	}
}

func refundOn(subject, id string, off time.Duration, amount int64, links ...string) commitlayer.Fact {
	return fact("payments", "refund_created", subject, id, off, attrs{"amount": amount}, links...)
}

func TestEvaluateForbidThrough(t *testing.T) {
	c := mustParse(t, throughSrc)
	P, F, U := commitlayer.StatusPass, commitlayer.StatusFail, commitlayer.StatusUnknown
	cases := []struct {
		name     string
		change   func(in *contracts.Input)
		policy   commitlayer.Status
		findings []string
		// facts and message, when set, are the no_refund finding's.
		facts   []string
		message string
	}{
		{"nothing refunded", func(in *contracts.Input) {}, P, nil, nil, ""},
		{"a refund of the customer's order (the order links the customer)", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", 2*time.Minute, 100))
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_1"},
			"no_refund: 1 forbidden payments refund_created where effect.amount > 0 fact after the action, on order:o_1 through customer:c_1"},
		{"a refund of the customer's order (the customer links the order)", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_3", "re_3", 2*time.Minute, 100))
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_3"},
			"no_refund: 1 forbidden payments refund_created where effect.amount > 0 fact after the action, on order:o_3 through customer:c_1"},
		{"the subscription reaches its customer through the customer's own link", func(in *contracts.Input) {
			in.Facts = slices.DeleteFunc(in.Facts, func(f commitlayer.Fact) bool {
				return f.ExternalID == "sc_1" || f.ExternalID == "ss_1" || f.ExternalID == "to_1"
			})
			in.Facts = append(in.Facts,
				fact("crm", "subscription_status_changed", "subscription:s_1", "ss_1", time.Minute, attrs{"status": "cancelled"}),
				fact("crm", "customer_note", "customer:c_1", "cn_1", -time.Hour, attrs{}, "subscription:s_1"),
				refundOn("order:o_1", "re_1", 2*time.Minute, 100))
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_1"}, ""},
		{"a refund on the subject itself is forbidden too, and named without a hub", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("subscription:s_1", "re_s", 2*time.Minute, 100))
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_s"},
			"no_refund: 1 forbidden payments refund_created where effect.amount > 0 fact after the action"},
		{"direct and reached facts: one finding, facts in time order, only the reached ones named", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_3", "re_3", 3*time.Minute, 100), refundOn("subscription:s_1", "re_s", 2*time.Minute, 100),
				refundOn("order:o_1", "re_1", 4*time.Minute, 100), refundOn("order:o_1", "re_1b", 5*time.Minute, 100))
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_s", "re_3", "re_1", "re_1b"},
			"no_refund: 4 forbidden payments refund_created where effect.amount > 0 facts after the action, on order:o_1, order:o_3 through customer:c_1"},
		{"a refund of another customer's order is not reached", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_2", "re_2", 2*time.Minute, 100))
		}, P, nil, nil, ""},
		{"three hops away is not reached", func(in *contracts.Input) {
			in.Facts = append(in.Facts,
				fact("shipping", "shipment_created", "shipment:sh_1", "sh_1", -time.Hour, attrs{}, "order:o_1"),
				refundOn("shipment:sh_1", "re_sh", 2*time.Minute, 100))
		}, P, nil, nil, ""},
		{"a hub of another type does not reach", func(in *contracts.Input) {
			in.Facts = append(in.Facts,
				fact("ledger", "account_opened", "account:acc_1", "ao_1", -time.Hour, attrs{}, "subscription:s_1"),
				fact("orders", "order_created", "order:o_9", "oc_9", -time.Hour, attrs{}, "account:acc_1"),
				refundOn("order:o_9", "re_9", 2*time.Minute, 100))
		}, P, nil, nil, ""},
		{"a malformed subject is no hub", func(in *contracts.Input) {
			in.Facts = append(in.Facts,
				fact("crm", "x", "subscription:s_1", "x_1", -time.Hour, attrs{}, "customer", "customer:"),
				fact("orders", "order_created", "order:o_9", "oc_9", -time.Hour, attrs{}, "customer"),
				fact("orders", "order_created", "order:o_8", "oc_8", -time.Hour, attrs{}, "customer:"),
				refundOn("order:o_9", "re_9", 2*time.Minute, 100), refundOn("order:o_8", "re_8", 2*time.Minute, 100))
		}, P, nil, nil, ""},
		{"two customers: each reached fact names its hub; a subject linked to both names the first", func(in *contracts.Input) {
			in.Facts = append(in.Facts,
				fact("crm", "subscription_transferred", "subscription:s_1", "st_1", -time.Hour, attrs{}, "customer:c_2"),
				fact("orders", "order_created", "order:o_4", "oc_4", -time.Hour, attrs{}, "customer:c_2", "customer:c_1"),
				refundOn("order:o_2", "re_2", 2*time.Minute, 100), refundOn("order:o_4", "re_4", 3*time.Minute, 100),
				refundOn("order:o_1", "re_1", 4*time.Minute, 100))
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_2", "re_4", "re_1"},
			"no_refund: 3 forbidden payments refund_created where effect.amount > 0 facts after the action, on order:o_1, order:o_4 through customer:c_1; on order:o_2 through customer:c_2"},
		{"where false: not forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", 2*time.Minute, 0))
		}, P, nil, nil, ""},
		{"where cannot be evaluated: not forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1", "re_1", 2*time.Minute, attrs{}))
		}, P, nil, nil, ""},
		{"another kind on the reached order is not forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, fact("payments", "charge_captured", "order:o_1", "ch_1", 2*time.Minute, attrs{"amount": int64(100)}))
		}, P, nil, nil, ""},
		{"before the action: not forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", -time.Second, 100))
		}, P, nil, nil, ""},
		{"inside the watch: forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", 71*time.Hour, 100))
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_1"}, ""},
		{"after the watch: not forbidden", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", 73*time.Hour, 100))
		}, P, nil, nil, ""},
		{"at or after the next action of the contract on the subject: not forbidden", func(in *contracts.Input) {
			in.Later = []commitlayer.Action{act("a_2", "cancel", "bot", "subscription:s_1", time.Hour, attrs{})}
			in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", time.Hour, 100))
		}, P, nil, nil, ""},
		{"payments unreachable and no refund: UNKNOWN", func(in *contracts.Input) {
			in.Coverage.Unreachable = map[string]string{"payments": "down"}
		}, U, []string{"source_unavailable no_refund"}, nil, ""},
		{"payments unreachable, a stored refund through the customer still proves the FAIL", func(in *contracts.Input) {
			in.Coverage.Unreachable = map[string]string{"payments": "down"}
			in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", 2*time.Minute, 100))
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_1"}, ""},
		{"the same facts given twice (overlapping fetches) count once", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", 2*time.Minute, 100))
			in.Facts = append(in.Facts, in.Facts...)
		}, F, []string{"forbidden_effect no_refund"}, []string{"re_1"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := throughWorld()
			tc.change(&in)
			v := c.Evaluate(in)
			requireConsistent(t, v)
			want := tc.findings
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, got(v), "%+v", v.Findings)
			require.Equal(t, commitlayer.StatusPass, v.Lenses.Outcome, "%+v", v.Findings)
			require.Equal(t, tc.policy, v.Lenses.Policy)
			if tc.facts != nil {
				require.Equal(t, tc.facts, finding(t, v, commitlayer.CodeForbiddenEffect, "no_refund").Facts)
			}
			if tc.message != "" {
				require.Equal(t, tc.message, finding(t, v, commitlayer.CodeForbiddenEffect, "no_refund").Message)
			}
			// The verdict does not depend on the order of the facts.
			slices.Reverse(in.Facts)
			require.Equal(t, v, c.Evaluate(in))
		})
	}
}

// Without `through`, the same forbid sees only the subject set: the
// customer's orders are two hops away.
func TestEvaluateForbidWithoutThroughStaysOneHop(t *testing.T) {
	c := mustParse(t, strings.Replace(throughSrc, "    through: customer\n", "", 1))
	in := throughWorld()
	in.Facts = append(in.Facts, refundOn("order:o_1", "re_1", 2*time.Minute, 100))
	require.Equal(t, []string{}, got(c.Evaluate(in)))
	require.Empty(t, c.ThroughSubjects(in.Action, in.Facts))

	// With it, on a contract whose subject is the hub type itself, the
	// customer's orders are already one hop away: found, no hub named.
	d := mustParse(t, strings.Replace(throughSrc, "subject: subscription", "subject: customer", 1))
	in.Action.Subject = "customer:c_1"
	in.Facts = append(in.Facts, fact("crm", "customer_status_changed", "customer:c_1", "cs_1", time.Minute, attrs{"status": "cancelled"}))
	v := d.Evaluate(in)
	f := finding(t, v, commitlayer.CodeForbiddenEffect, "no_refund")
	require.Equal(t, []string{"re_1"}, f.Facts)
	require.NotContains(t, f.Message, "through")
	require.Empty(t, d.ThroughSubjects(in.Action, in.Facts), "the action's own subject is never returned")
}

// A duplicated fact counts once everywhere, not only in forbids: an effect
// with count: 1 given twice is no duplicate.
func TestEvaluateFactGivenTwiceCountsOnce(t *testing.T) {
	c := mustParse(t, throughSrc)
	in := throughWorld()
	in.Facts = append(in.Facts, in.Facts[len(in.Facts)-1])
	require.Equal(t, []string{}, got(c.Evaluate(in)))

	// A second fact with its own id is a duplicate.
	second := in.Facts[len(in.Facts)-1]
	second.ExternalID = "ss_2"
	in.Facts = append(in.Facts, second)
	require.Equal(t, []string{"duplicate_effect cancelled"}, got(c.Evaluate(in)))

	// So is one at another time or seq with the same id (not the same
	// fact as fetched twice), and one without an external id.
	for _, change := range []func(f *commitlayer.Fact){
		func(f *commitlayer.Fact) { f.OccurredAt = f.OccurredAt.Add(time.Second) },
		func(f *commitlayer.Fact) { f.Seq = 9 },
	} {
		in := throughWorld()
		again := in.Facts[len(in.Facts)-1]
		change(&again)
		in.Facts = append(in.Facts, again)
		require.Equal(t, []string{"duplicate_effect cancelled"}, got(c.Evaluate(in)))
	}
	in = throughWorld()
	in.Facts[len(in.Facts)-1].ExternalID = ""
	in.Facts = append(in.Facts, in.Facts[len(in.Facts)-1])
	require.Equal(t, []string{"duplicate_effect cancelled"}, got(c.Evaluate(in)))
}

func TestThroughSubjects(t *testing.T) {
	c := mustParse(t, throughSrc)
	a := act("a_1", "cancel", "bot", "subscription:s_1", 0, attrs{})
	link := func(subject string, links ...string) commitlayer.Fact {
		return fact("crm", "x", subject, subject+strings.Join(links, ","), 0, attrs{}, links...)
	}
	cases := []struct {
		name  string
		facts []commitlayer.Fact
		want  []commitlayer.Subject
	}{
		{"no facts", nil, nil},
		{"no links", []commitlayer.Fact{link("subscription:s_1"), link("customer:c_1")}, nil},
		{"the subject links a customer", []commitlayer.Fact{link("subscription:s_1", "customer:c_1")}, []commitlayer.Subject{"customer:c_1"}},
		{"a customer links the subject", []commitlayer.Fact{link("customer:c_1", "subscription:s_1")}, []commitlayer.Subject{"customer:c_1"}},
		{"sorted, each once, other types left out", []commitlayer.Fact{
			link("subscription:s_1", "customer:c_2", "ticket:t_1", "customer:c_1"),
			link("customer:c_1", "subscription:s_1"),
			link("account:acc_1", "subscription:s_1"),
			link("subscription:s_1", "customer:c_2"),
		}, []commitlayer.Subject{"customer:c_1", "customer:c_2"}},
		{"two hops away is not linked", []commitlayer.Fact{
			link("ticket:t_1", "subscription:s_1"),
			link("ticket:t_1", "customer:c_9"),
			link("order:o_1", "customer:c_8"),
		}, nil},
		{"another subject's customer is not linked", []commitlayer.Fact{link("subscription:s_2", "customer:c_2")}, nil},
		{"malformed subjects are of no type", []commitlayer.Fact{
			link("subscription:s_1", "customer", "customer:", "Customer:c_1", "customers:c_1"),
			link("customer", "subscription:s_1"),
		}, nil},
		{"the subject linking itself is not returned", []commitlayer.Fact{link("subscription:s_1", "subscription:s_1")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, c.ThroughSubjects(a, tc.facts))
		})
	}

	t.Run("no through: always empty", func(t *testing.T) {
		d := mustParse(t, refundSrc)
		require.Empty(t, d.ThroughSubjects(a, []commitlayer.Fact{link("subscription:s_1", "customer:c_1")}))
	})
	t.Run("several through types, in any forbid", func(t *testing.T) {
		d := mustParse(t, throughSrc+`  - {id: no_payout, source: payments, type: payout_sent, through: account}
  - {id: no_refund_again, source: payments, type: refund_reversed, through: customer}
`)
		facts := []commitlayer.Fact{link("subscription:s_1", "customer:c_1", "account:acc_1", "ticket:t_1")}
		require.Equal(t, []commitlayer.Subject{"account:acc_1", "customer:c_1"}, d.ThroughSubjects(a, facts))
	})
}

// aboutFacts returns what a store returns for subjects (postgres
// FactsAbout): the facts on them, the facts linking them, and every fact on
// a subject one hop away from those.
func aboutFacts(all []commitlayer.Fact, subjects []commitlayer.Subject) []commitlayer.Fact {
	want := map[commitlayer.Subject]bool{}
	for _, s := range subjects {
		want[s] = true
	}
	hop := map[commitlayer.Subject]bool{}
	for _, f := range all {
		linking := slices.ContainsFunc(f.Links, func(l commitlayer.Subject) bool { return want[l] })
		if want[f.Subject] || linking {
			hop[f.Subject] = true
			for _, l := range f.Links {
				hop[l] = true
			}
		}
	}
	var out []commitlayer.Fact
	for _, f := range all {
		if want[f.Subject] || hop[f.Subject] || slices.ContainsFunc(f.Links, func(l commitlayer.Subject) bool { return want[l] }) {
			out = append(out, f)
		}
	}
	return out
}

// The caller's part: the facts about the action's subject, then the facts
// about ThroughSubjects of those, appended (overlaps and all), give the
// verdict the whole tenant's facts give.
func TestThroughSubjectsFetchExactlyWhatIsNeeded(t *testing.T) {
	c := mustParse(t, throughSrc)
	in := throughWorld()
	in.Facts = append(in.Facts,
		refundOn("order:o_1", "re_1", 2*time.Minute, 100),
		refundOn("order:o_3", "re_3", 3*time.Minute, 100),
		refundOn("order:o_2", "re_2", 4*time.Minute, 100))
	want := c.Evaluate(in)
	require.Equal(t, []string{"re_1", "re_3"}, finding(t, want, commitlayer.CodeForbiddenEffect, "no_refund").Facts)

	own := aboutFacts(in.Facts, []commitlayer.Subject{in.Action.Subject})
	through := c.ThroughSubjects(in.Action, own)
	require.Equal(t, []commitlayer.Subject{"customer:c_1"}, through)
	fetched := in
	fetched.Facts = append(slices.Clone(own), aboutFacts(in.Facts, through)...)
	require.Greater(t, len(fetched.Facts), len(own), "the through fetch adds facts")
	require.Equal(t, want, c.Evaluate(fetched))

	// The first fetch alone misses the refunds two hops away.
	alone := in
	alone.Facts = own
	require.Equal(t, []string{}, got(c.Evaluate(alone)))
}

func TestParseThrough(t *testing.T) {
	c := mustParse(t, throughSrc)
	require.Equal(t, "customer", c.Spec.Forbids[0].Through)
	b, err := json.Marshal(c.Spec)
	require.NoError(t, err)
	require.Contains(t, string(b), `"through":"customer"`)
	require.Equal(t, c.Spec, mustParse(t, string(b)).Spec)

	// Left out: not in the JSON.
	d := mustParse(t, refundSrc)
	b, err = json.Marshal(d.Spec)
	require.NoError(t, err)
	require.NotContains(t, string(b), "through")

	base := "id: c\nsettlement: 10m\nsources: [p]\n"
	cases := []struct {
		name, src, field string
		line             int
		reason           string
	}{
		{"empty", base + "forbids:\n  - id: f\n    source: p\n    type: t\n    through: ''\n", "forbids[0].through", 8, "must not be empty"},
		{"upper case", base + "forbids:\n  - id: f\n    source: p\n    type: t\n    through: Customer\n", "forbids[0].through", 8, `"Customer" is not a subject type`},
		{"a subject, not a type", base + "forbids:\n  - id: f\n    source: p\n    type: t\n    through: customer:c_1\n", "forbids[0].through", 8, "is not a subject type"},
		{"spaces", base + "forbids:\n  - {id: f, source: p, type: t, through: 'cust omer'}\n", "forbids[0].through", 5, "is not a subject type"},
		{"too long", base + "forbids:\n  - {id: f, source: p, type: t, through: " + strings.Repeat("a", 129) + "}\n", "forbids[0].through", 5, "is not a subject type"},
		{"a list", base + "forbids:\n  - {id: f, source: p, type: t, through: [customer]}\n", "forbids[0].through", 5, "must be a string"},
		{"null", base + "forbids:\n  - {id: f, source: p, type: t, through: null}\n", "forbids[0].through", 5, "must be a string"},
		{"on an effect: unknown field", base + "effects:\n  - {id: e, source: p, type: t, through: customer}\n", "effects[0].through", 5, "unknown field"},
		{"on a reversal: unknown field", base + "effects:\n  - id: e\n    source: p\n    type: t\n    reversed_by: {source: p, type: u, through: customer}\n", "effects[0].reversed_by.through", 8, "unknown field"},
		{"given twice", base + "forbids:\n  - id: f\n    source: p\n    type: t\n    through: a\n    through: b\n", "forbids[0].through", 9, "given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := contracts.Parse([]byte(tc.src))
			require.Error(t, err)
			errs := contracts.Errors(err)
			require.Len(t, errs, 1, "%v", err)
			require.Equal(t, tc.field, errs[0].Field, "%v", err)
			require.Equal(t, tc.line, errs[0].Line, "%v", err)
			require.Contains(t, errs[0].Reason, tc.reason)
		})
	}
	for _, ok := range []string{"customer", "c", "customer_2", "0"} {
		c := mustParse(t, base+"forbids:\n  - {id: f, source: p, type: t, through: "+ok+"}\n")
		require.Equal(t, ok, c.Spec.Forbids[0].Through)
	}
}

// Orphans do not follow `through`: a refund of the customer's order is
// forbidden for the cancel action (its verdict FAILs) and is still an
// orphan of the contract, since no cancel action is about the order or a
// subject linked to it. A refund the cancel action's subject set holds
// (one hop) is covered as before.
func TestOrphansIgnoreThrough(t *testing.T) {
	c := sandboxContract(t, "cancel_subscription")
	in := throughWorld()
	in.Action.Contract = c.ID()
	in.Facts = append(in.Facts,
		refundOn("order:o_1", "re_1", 2*time.Minute, 100),
		refundOn("subscription:s_1", "re_s", 2*time.Minute, 100))
	require.Contains(t, got(c.Evaluate(in)), "forbidden_effect no_refund")
	out := contracts.Orphans(c, []commitlayer.Action{in.Action}, in.Facts)
	require.Len(t, out, 1)
	require.Equal(t, commitlayer.Subject("order:o_1"), out[0].Fact.Subject)
	require.Equal(t, "no_refund", out[0].Check)
}
