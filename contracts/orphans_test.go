package contracts_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

func TestOrphans(t *testing.T) {
	c := mustParse(t, refundSrc) // settlement 10m + watch 72h
	refund := func(id, order string, off time.Duration) commitlayer.Fact {
		return fact("payments", "refund_created", "order:"+order, id, off, attrs{"refund_id": id, "amount": int64(100)})
	}
	base := []commitlayer.Fact{
		fact("orders", "order_created", "order:o_1", "oc_1", -time.Hour, attrs{"status": "paid"}, "customer:c_1"),
		fact("tickets", "ticket_opened", "ticket:t_1", "to_1", -time.Hour, attrs{}, "order:o_1"),
		fact("orders", "order_created", "order:o_2", "oc_2", -time.Hour, attrs{"status": "paid"}, "customer:c_1"),
	}
	actions := []commitlayer.Action{act("a1", "refund", "bot", "order:o_1", 0, attrs{})}
	cases := []struct {
		name    string
		facts   []commitlayer.Fact
		actions []commitlayer.Action
		want    []string // "check fact"
	}{
		{"the action's own effects are covered", []commitlayer.Fact{
			refund("re_1", "o_1", time.Minute),
			fact("orders", "order_status_changed", "order:o_1", "os_1", 2*time.Minute, attrs{"status": "refunded"}),
		}, actions, nil},
		{"a refund on another customer's order is an orphan (wrong subject)", []commitlayer.Fact{
			refund("re_1", "o_1", time.Minute), refund("re_x", "o_7", time.Minute),
		}, actions, []string{"refund re_x"}},
		{"a sibling order of the same customer is two hops away: orphan", []commitlayer.Fact{
			refund("re_2", "o_2", time.Minute),
		}, actions, []string{"refund re_2"}},
		{"a note on a ticket linked to the order is covered (fact's own links)", []commitlayer.Fact{
			fact("tickets", "note_added", "ticket:t_1", "n_1", time.Minute, attrs{}, "order:o_1"),
		}, actions, nil},
		{"a note on a ticket linked through another fact is covered", []commitlayer.Fact{
			fact("tickets", "note_added", "ticket:t_1", "n_1", time.Minute, attrs{}),
		}, actions, nil},
		{"a note on an unlinked ticket is an orphan", []commitlayer.Fact{
			fact("tickets", "note_added", "ticket:t_5", "n_5", time.Minute, attrs{}),
		}, actions, []string{"customer_notified n_5"}},
		{"an effect before the action is an orphan", []commitlayer.Fact{
			refund("re_0", "o_1", -time.Minute),
		}, actions, []string{"refund re_0"}},
		{"an effect at requested_at and at the window's end is covered", []commitlayer.Fact{
			refund("re_a", "o_1", 0), refund("re_b", "o_1", 72*time.Hour+10*time.Minute),
		}, actions, nil},
		{"an effect after the window is an orphan", []commitlayer.Fact{
			refund("re_late", "o_1", 72*time.Hour+10*time.Minute+time.Second),
		}, actions, []string{"refund re_late"}},
		{"an action of another contract does not cover", []commitlayer.Fact{
			refund("re_1", "o_1", time.Minute),
		}, []commitlayer.Action{act("a1", "cancel", "bot", "order:o_1", 0, attrs{})}, []string{"refund re_1"}},
		{"where false is not this contract's kind of effect", []commitlayer.Fact{
			fact("orders", "order_status_changed", "order:o_7", "os_7", time.Minute, attrs{"status": "shipped"}),
		}, actions, nil},
		{"where that cannot be evaluated counts as a match", []commitlayer.Fact{
			fact("orders", "order_status_changed", "order:o_7", "os_7", time.Minute, attrs{}),
		}, actions, []string{"order_refunded os_7"}},
		{"forbidden kinds are orphans too", []commitlayer.Fact{
			fact("orders", "order_status_changed", "order:o_7", "os_7", time.Minute, attrs{"status": "cancelled"}),
		}, actions, []string{"no_cancellation os_7"}},
		{"a reversal is not an orphan", []commitlayer.Fact{
			fact("payments", "refund_reversed", "order:o_7", "rr_7", time.Minute, attrs{}),
		}, actions, nil},
		{"unrelated facts are ignored; orphans come in time order", []commitlayer.Fact{
			refund("re_y", "o_8", 3*time.Minute), refund("re_x", "o_7", time.Minute),
			fact("crm", "customer_created", "customer:c_9", "cc_9", time.Minute, attrs{}),
		}, nil, []string{"refund re_x", "refund re_y"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			facts := append(append([]commitlayer.Fact{}, base...), tc.facts...)
			out := contracts.Orphans(c, tc.actions, facts)
			require.NotNil(t, out)
			gotOrphans := []string{}
			for _, o := range out {
				require.Equal(t, "refund", o.Contract)
				gotOrphans = append(gotOrphans, o.Check+" "+o.Fact.ExternalID)
			}
			want := tc.want
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, gotOrphans)
		})
	}
	t.Run("wire shape", func(t *testing.T) {
		out := contracts.Orphans(c, nil, []commitlayer.Fact{refund("re_x", "o_7", 0)})
		b, err := json.Marshal(out[0])
		require.NoError(t, err)
		require.JSONEq(t, `{"contract_id":"refund","check":"refund","fact":{"source":"payments","type":"refund_created",
			"subject":"order:o_7","external_id":"re_x","occurred_at":"2026-11-29T10:00:00Z","attrs":{"refund_id":"re_x","amount":100}}}`, string(b))
	})
}

func TestOrphansOptOut(t *testing.T) {
	// Notes and closes on tickets: a note happens for many reasons, so its
	// effect is left out of orphans; a close is not. The forbidden reopen
	// shares its kind with the close.
	c := mustParse(t, `
id: close
subject: ticket
settlement: 10m
watch: 72h
sources: [tickets]
effects:
  - {id: note, source: tickets, type: note_added, orphans: false}
  - {id: closed, source: tickets, type: ticket_status_changed, where: "effect.status == 'closed'", orphans: false}
  - {id: tagged, source: tickets, type: tagged}
forbids:
  - {id: no_reopen, source: tickets, type: ticket_status_changed, where: "effect.status == 'open'"}
  - {id: no_delete, source: tickets, type: deleted, orphans: false}
  - {id: no_spam, source: tickets, type: tagged, where: "effect.tag == 'spam'", orphans: false}
`)
	actions := []commitlayer.Action{act("a1", "close", "bot", "ticket:t_1", 0, attrs{})}
	status := func(id, ticket, s string, links ...string) commitlayer.Fact {
		return fact("tickets", "ticket_status_changed", "ticket:"+ticket, id, time.Minute, attrs{"status": s}, links...)
	}
	cases := []struct {
		name  string
		facts []commitlayer.Fact
		want  []string
	}{
		{"an effect with orphans: false is never an orphan", []commitlayer.Fact{
			fact("tickets", "note_added", "ticket:t_5", "n_5", time.Minute, attrs{}),
		}, nil},
		{"a forbid with orphans: false is never an orphan", []commitlayer.Fact{
			fact("tickets", "deleted", "ticket:t_5", "d_5", time.Minute, attrs{}),
		}, nil},
		{"another check of the same kind still reports its facts", []commitlayer.Fact{
			status("s_c", "t_5", "closed"), status("s_o", "t_6", "open"),
		}, []string{"no_reopen s_o"}},
		{"a fact that both an opted-out check and another check match is reported under the other", []commitlayer.Fact{
			fact("tickets", "tagged", "ticket:t_5", "tg_5", time.Minute, attrs{"tag": "spam"}),
		}, []string{"tagged tg_5"}},
		{"an opted-out fact still links subjects for coverage", []commitlayer.Fact{
			// The note on t_7 names t_1; the reopen on t_7 is covered by a1.
			fact("tickets", "note_added", "ticket:t_7", "n_7", time.Minute, attrs{}, "ticket:t_1"),
			status("s_7", "t_7", "open"),
		}, nil},
		{"without the linking note the reopen is an orphan", []commitlayer.Fact{
			status("s_7", "t_7", "open"),
		}, []string{"no_reopen s_7"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gotOrphans := []string{}
			for _, o := range contracts.Orphans(c, actions, tc.facts) {
				gotOrphans = append(gotOrphans, o.Check+" "+o.Fact.ExternalID)
			}
			want := tc.want
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, gotOrphans)
		})
	}

	t.Run("opting out changes nothing in a verdict", func(t *testing.T) {
		on := mustParse(t, refundSrc)
		off := mustParse(t, strings.Replace(refundSrc, "    type: note_added\n", "    type: note_added\n    orphans: false\n", 1))
		require.False(t, off.Spec.Effects[2].ReportsOrphans())
		in := refundWorld()
		in.Facts = without(in.Facts, "n_1")
		require.Equal(t, on.Evaluate(in), off.Evaluate(in))
		require.Equal(t, []string{"missing_effect customer_notified"}, got(off.Evaluate(in)))
	})
}

// TestSandboxNotesAreNotOrphans: in a tenant running several workflows a
// note on a ticket is no sandbox contract's orphan, while the effects that
// say what was done (a refund, a close) still are.
func TestSandboxNotesAreNotOrphans(t *testing.T) {
	stray := []commitlayer.Fact{
		note("tickets-n", "t_99", "order:o_1099", "c_99", time.Minute),
		fact("tickets", "note_added", "ticket:t_98", "tickets-n2", time.Minute, attrs{"body": "fyi"}),
	}
	for _, id := range []string{"refund_customer", "cancel_subscription", "change_shipping_address", "approve_discount", "close_support_case"} {
		t.Run(id, func(t *testing.T) {
			c := sandboxContract(t, id)
			require.Equal(t, []contracts.Orphan{}, contracts.Orphans(c, nil, stray))
		})
	}
	refund := fact("payments", "refund_created", "order:o_1099", "payments-re", time.Minute, attrs{"refund_id": "re_9", "amount": int64(100)})
	out := contracts.Orphans(sandboxContract(t, "refund_customer"), nil, append(stray, refund))
	require.Len(t, out, 1)
	require.Equal(t, "refund", out[0].Check)
	closed := fact("tickets", "ticket_status_changed", "ticket:t_98", "tickets-c", 2*time.Minute, attrs{"status": "closed"})
	out = contracts.Orphans(sandboxContract(t, "close_support_case"), nil, append(stray, closed))
	require.Len(t, out, 1)
	require.Equal(t, "closed", out[0].Check)
}
