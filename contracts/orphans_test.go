package contracts_test

import (
	"encoding/json"
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
