package contracts_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// laterRefund is a second, legitimate refund action on the order of
// refundWorld, requested at t0+off, and the refund it produced a minute
// later.
func laterRefund(in *contracts.Input, id string, off time.Duration, amount int64) {
	in.Later = append(in.Later, act(id, "refund", "bot", "order:o_1", off, attrs{"amount": amount}))
	in.Facts = append(in.Facts, fact("payments", "refund_created", "order:o_1", "re_"+id, off+time.Minute,
		attrs{"refund_id": "re_" + id, "amount": amount}))
}

func refundFact(id string, off time.Duration, amount int64) commitlayer.Fact {
	return fact("payments", "refund_created", "order:o_1", id, off, attrs{"refund_id": id, "amount": amount})
}

func cancellation(id string, off time.Duration) commitlayer.Fact {
	return fact("orders", "order_status_changed", "order:o_1", id, off, attrs{"status": "cancelled"})
}

func TestEvaluateLaterActionBoundsWindow(t *testing.T) {
	c := mustParse(t, refundSrc) // settlement 10m + watch 72h; refund count 1
	end := 72*time.Hour + 10*time.Minute
	cases := []struct {
		name     string
		change   func(in *contracts.Input)
		findings []string
	}{
		{"without Later, the next day's refund looks like a duplicate", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundFact("re_a2", 24*time.Hour+time.Minute, 2500))
		}, []string{"duplicate_effect refund"}},
		{"a later action's refund is its own, not a duplicate", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 2500)
		}, nil},
		{"a duplicate before the later action still counts", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundFact("re_dup", 5*time.Minute, 2500))
			laterRefund(in, "a2", 24*time.Hour, 2500)
		}, []string{"duplicate_effect refund"}},
		{"a fact at the later action's requested_at is the later action's", func(in *contracts.Input) {
			in.Later = append(in.Later, act("a2", "refund", "bot", "order:o_1", 24*time.Hour, attrs{}))
			in.Facts = append(in.Facts, refundFact("re_a2", 24*time.Hour, 2500))
		}, nil},
		{"a fact just before the later action's requested_at is this action's", func(in *contracts.Input) {
			in.Later = append(in.Later, act("a2", "refund", "bot", "order:o_1", 24*time.Hour, attrs{}))
			in.Facts = append(in.Facts, refundFact("re_a2", 24*time.Hour-time.Nanosecond, 2500))
		}, []string{"duplicate_effect refund"}},
		{"a later action after the watch does not narrow the window", func(in *contracts.Input) {
			in.Later = append(in.Later, act("a2", "refund", "bot", "order:o_1", 80*time.Hour, attrs{}))
			in.Facts = append(in.Facts, refundFact("re_x", 70*time.Hour, 2500))
		}, []string{"duplicate_effect refund"}},
		{"without Later, a fact at the window's last instant counts", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundFact("re_x", end, 2500))
		}, []string{"duplicate_effect refund"}},
		{"a later action at the window's last instant takes that instant", func(in *contracts.Input) {
			in.Later = append(in.Later, act("a2", "refund", "bot", "order:o_1", end, attrs{}))
			in.Facts = append(in.Facts, refundFact("re_x", end, 2500))
		}, nil},
		{"the earliest of several later actions bounds the window", func(in *contracts.Input) {
			in.Later = append(in.Later, act("a3", "refund", "bot", "order:o_1", 48*time.Hour, attrs{}),
				act("a2", "refund", "bot", "order:o_1", 24*time.Hour, attrs{}))
			in.Facts = append(in.Facts, refundFact("re_x", 30*time.Hour, 2500))
		}, nil},
		{"a later action of another contract is ignored", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 2500)
			in.Later[0].Contract = "cancel"
		}, []string{"duplicate_effect refund"}},
		{"a later action on another subject is ignored", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 2500)
			in.Later[0].Subject = "order:o_2"
		}, []string{"duplicate_effect refund"}},
		{"a linked subject is another subject", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 2500)
			in.Later[0].Subject = "ticket:t_1"
		}, []string{"duplicate_effect refund"}},
		{"a 'later' action requested before this one is ignored", func(in *contracts.Input) {
			in.Later = append(in.Later, act("a0", "refund", "bot", "order:o_1", -time.Hour, attrs{}))
			in.Facts = append(in.Facts, refundFact("re_x", 24*time.Hour, 2500))
		}, []string{"duplicate_effect refund"}},
		{"a later action requested at the same instant is ignored", func(in *contracts.Input) {
			laterRefund(in, "a2", 0, 2500)
		}, []string{"duplicate_effect refund"}},
		{"the action itself listed as later is ignored", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 2500)
			in.Later[0].ID = "a_1"
		}, []string{"duplicate_effect refund"}},
		{"an effect only after the later action is missing for this one", func(in *contracts.Input) {
			in.Facts = without(in.Facts, "re_1")
			laterRefund(in, "a2", 24*time.Hour, 2500)
		}, []string{"missing_effect refund"}},
		{"the later action's refund of another amount does not differ", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 999)
		}, nil},
		{"without Later, that refund differs and is a duplicate", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundFact("re_a2", 24*time.Hour+time.Minute, 999))
		}, []string{"duplicate_effect refund", "effect_differs refund"}},
		{"a cancellation after the later action is not blamed on this one", func(in *contracts.Input) {
			in.Later = append(in.Later, act("a2", "refund", "bot", "order:o_1", 24*time.Hour, attrs{}))
			in.Facts = append(in.Facts, cancellation("os_c", 25*time.Hour))
		}, nil},
		{"a cancellation before the later action is", func(in *contracts.Input) {
			in.Later = append(in.Later, act("a2", "refund", "bot", "order:o_1", 24*time.Hour, attrs{}))
			in.Facts = append(in.Facts, cancellation("os_c", 5*time.Hour))
		}, []string{"forbidden_effect no_cancellation"}},
		{"a reversal of this action's refund after the later action still counts", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 2500)
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_1", 30*time.Hour, attrs{"refund_id": "re_1"}))
		}, []string{"effect_reversed refund"}},
		{"a reversal long after the watch and the later action still counts", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 2500)
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_1", 300*time.Hour, attrs{"refund_id": "re_1"}))
		}, []string{"effect_reversed refund"}},
		{"a reversal of the later action's refund is not this action's", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 2500)
			in.Facts = append(in.Facts, fact("payments", "refund_reversed", "order:o_1", "rr_2", 30*time.Hour, attrs{"refund_id": "re_a2"}))
		}, nil},
		{"the later action's refund no longer counts toward this action's limit", func(in *contracts.Input) {
			laterRefund(in, "a2", 24*time.Hour, 62000)
		}, nil},
		{"without Later, it does (and is a duplicate)", func(in *contracts.Input) {
			in.Facts = append(in.Facts, refundFact("re_a2", 24*time.Hour+time.Minute, 62000))
		}, []string{"duplicate_effect refund", "effect_differs refund", "limit_exceeded daily_total"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := refundWorld()
			in.Now = t0.Add(400 * time.Hour)
			tc.change(&in)
			v := c.Evaluate(in)
			requireConsistent(t, v)
			want := tc.findings
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, got(v), "%+v", v.Findings)
			// Later entries never change the verdict's own fields.
			require.Equal(t, c.SettlesAt(t0), v.SettlesAt)
			require.False(t, v.Provisional)
		})
	}
}

func TestEvaluateLaterActionMessages(t *testing.T) {
	c := mustParse(t, refundSrc)
	in := refundWorld()
	in.Facts = without(in.Facts, "re_1")
	laterRefund(&in, "a2", 24*time.Hour, 2500)
	f := finding(t, c.Evaluate(in), commitlayer.CodeMissingEffect, "refund")
	require.Equal(t, "refund: no payments refund_created fact on order:o_1 or its linked subjects from 2026-11-29T10:00:00Z "+
		"until 2026-11-30T10:00:00Z, when the next action a2 was requested", f.Message)
	require.Equal(t, []string{}, f.Facts)

	in.Later[0].ID = ""
	f = finding(t, c.Evaluate(in), commitlayer.CodeMissingEffect, "refund")
	require.Equal(t, "refund: no payments refund_created fact on order:o_1 or its linked subjects from 2026-11-29T10:00:00Z "+
		"until 2026-11-30T10:00:00Z, when the next action was requested", f.Message)
}

func TestEvaluateLaterActionNoSignal(t *testing.T) {
	c := mustParse(t, `
id: vendor_resolved
kind: outcome
settlement: 1h
sources: [tickets]
effects:
  - {id: closed, source: tickets, type: ticket_status_changed, where: "effect.status == 'closed'"}
`)
	in := contracts.Input{
		Action:   act("o1", "vendor_resolved", "vendor", "ticket:t_1", 0, attrs{}),
		Later:    []commitlayer.Action{act("o2", "vendor_resolved", "vendor", "ticket:t_1", 2*time.Hour, attrs{})},
		Facts:    []commitlayer.Fact{fact("tickets", "ticket_status_changed", "ticket:t_1", "s1", 3*time.Hour, attrs{"status": "closed"})},
		Coverage: connected("tickets"),
		Now:      t0.Add(5 * time.Hour),
	}
	v := c.Evaluate(in)
	requireConsistent(t, v)
	require.Equal(t, []string{"no_signal effects"}, got(v))
	require.Equal(t, "effects: no fact of any effect's kind (tickets ticket_status_changed) on ticket:t_1 or its linked subjects "+
		"since the action until the next action o2 at 2026-11-29T12:00:00Z", v.Findings[0].Message)

	// Without Later, the close is a signal, though after the window.
	in.Later = nil
	require.Equal(t, []string{"missing_effect closed"}, got(c.Evaluate(in)))

	// A fact after the window but before the next action is this action's
	// signal.
	in.Later = []commitlayer.Action{act("o2", "vendor_resolved", "vendor", "ticket:t_1", 2*time.Hour, attrs{})}
	in.Facts = append(in.Facts, fact("tickets", "ticket_status_changed", "ticket:t_1", "s0", 90*time.Minute, attrs{"status": "closed"}))
	require.Equal(t, []string{"missing_effect closed"}, got(c.Evaluate(in)))
}

func TestEvaluateLaterActionBoundsPriorsInLimits(t *testing.T) {
	c := mustParse(t, refundSrc) // daily_total: per agent, 24h, max 64000
	// bot refunded 31000 on o_2 ten hours ago (p1); five hours ago a human
	// refunded 31000 more on the same order (h1). Only bot's refunds count
	// toward bot's limit: 31000 + 2500 now.
	base := func() contracts.Input {
		in := refundWorld()
		in.Prior = []commitlayer.Action{
			act("p1", "refund", "bot", "order:o_2", -10*time.Hour, attrs{"amount": int64(31000)}),
			act("h1", "refund", "human", "order:o_2", -5*time.Hour, attrs{"amount": int64(31000)}),
		}
		in.Facts = append(in.Facts,
			fact("payments", "refund_created", "order:o_2", "re_p1", -10*time.Hour+time.Minute, attrs{"refund_id": "re_p1", "amount": int64(31000)}),
			fact("payments", "refund_created", "order:o_2", "re_h1", -5*time.Hour+time.Minute, attrs{"refund_id": "re_h1", "amount": int64(31000)}))
		return in
	}
	cases := []struct {
		name   string
		change func(in *contracts.Input)
		exceed []string // counted facts when exceeded
	}{
		{"the human's later action on the order ends bot's window", func(in *contracts.Input) {}, nil},
		{"without it, the human's refund counted toward bot's limit", func(in *contracts.Input) {
			in.Prior = in.Prior[:1]
		}, []string{"re_p1", "re_h1", "re_1"}},
		{"a later action of another contract does not end it", func(in *contracts.Input) {
			in.Prior[1].Contract = "cancel"
		}, []string{"re_p1", "re_h1", "re_1"}},
		{"the same bound given through Later works too", func(in *contracts.Input) {
			in.Later = append(in.Later, in.Prior[1])
			in.Prior = in.Prior[:1]
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.change(&in)
			v := c.Evaluate(in)
			requireConsistent(t, v)
			if tc.exceed == nil {
				require.NotContains(t, got(v), "limit_exceeded daily_total", "%+v", v.Findings)
				return
			}
			f := finding(t, v, commitlayer.CodeLimitExceeded, "daily_total")
			require.Equal(t, tc.exceed, f.Facts)
		})
	}

	t.Run("the verified action ends a prior's window on its own subject", func(t *testing.T) {
		c := mustParse(t, `
id: refund
settlement: 10m
watch: 72h
sources: [payments]
limits:
  - {id: daily_total, per: agent, window: 24h, effect: refund, sum: effect.amount, max: 50000}
effects:
  - {id: refund, source: payments, type: refund_created, where: "effect.currency == params.currency"}
`)
		// p2 refunded 20000 EUR on o_1 an hour ago; the action refunds 2500
		// USD. A 30000 EUR refund after the action is not p2's any more.
		in := contracts.Input{
			Action: act("a_1", "refund", "bot", "order:o_1", 0, attrs{"currency": "USD"}),
			Prior:  []commitlayer.Action{act("p2", "refund", "bot", "order:o_1", -time.Hour, attrs{"currency": "EUR"})},
			Facts: []commitlayer.Fact{
				fact("payments", "refund_created", "order:o_1", "re_p2", -59*time.Minute, attrs{"amount": int64(20000), "currency": "EUR"}),
				fact("payments", "refund_created", "order:o_1", "re_1", time.Minute, attrs{"amount": int64(2500), "currency": "USD"}),
				fact("payments", "refund_created", "order:o_1", "re_e", 2*time.Minute, attrs{"amount": int64(30000), "currency": "EUR"}),
			},
			Coverage: connected("payments"),
			Now:      t0.Add(time.Hour),
		}
		v := c.Evaluate(in)
		requireConsistent(t, v)
		require.Equal(t, []string{}, got(v))
		// Were p2 requested at the same instant as the action, nothing
		// would end its window: 20000 + 30000 + 2500.
		in.Prior[0].RequestedAt = t0
		in.Facts[0].OccurredAt = t0
		f := finding(t, c.Evaluate(in), commitlayer.CodeLimitExceeded, "daily_total")
		require.Equal(t, []string{"re_p2", "re_1", "re_e"}, f.Facts)
	})
}
