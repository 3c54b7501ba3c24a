package contracts_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// TestMayChange: facts of a kind the refund contract reads (an effect, its
// reversal, a forbid), facts linking a subject, and facts of its sources
// from before the action may change its verdict; notes of another source,
// and of its sources from the action on, may not. A digest that says
// nothing may.
func TestMayChange(t *testing.T) {
	c := mustParse(t, refundSrc)
	through := mustParse(t, throughSrc)
	at := t0
	digest := func(facts ...commitlayer.Fact) *contracts.Digest { return contracts.DigestFacts(facts) }
	for _, tc := range []struct {
		name  string
		d     *contracts.Digest
		maybe bool
	}{
		{"nothing said", nil, true},
		{"an effect's kind", digest(fact("payments", "refund_created", "order:o_1", "r", time.Hour, nil)), true},
		{"a reversal's kind", digest(fact("payments", "refund_reversed", "order:o_1", "r", time.Hour, nil)), true},
		{"a forbid's (and an effect's) kind", digest(fact("orders", "order_status_changed", "order:o_1", "s", time.Hour, nil)), true},
		{"another source's fact", digest(fact("crm", "note_added", "order:o_1", "n", -time.Hour, nil)), false},
		{"a source's other kind, after the action", digest(fact("payments", "charge_captured", "order:o_1", "c", time.Minute, nil)), false},
		{"a source's other kind, at the action", digest(fact("payments", "charge_captured", "order:o_1", "c", 0, nil)), false},
		{"a source's other kind, before the action (the policy's state)", digest(fact("orders", "order_created", "order:o_1", "o", -time.Second, nil)), true},
		{"one fact of many before the action", digest(fact("orders", "order_created", "order:o_1", "o1", time.Hour, nil),
			fact("orders", "order_created", "order:o_1", "o2", -time.Hour, nil)), true},
		{"a link", digest(fact("crm", "note_added", "order:o_1", "n", time.Hour, nil, "customer:c_1")), true},
		{"one of many readable", digest(fact("crm", "note_added", "order:o_1", "n", time.Hour, nil),
			fact("payments", "refund_created", "order:o_1", "r", time.Hour, nil)), true},
	} {
		require.Equal(t, tc.maybe, c.MayChange(tc.d, at), tc.name)
	}
	// The through contract's forbid reads payments' refunds; its effect
	// crm's subscriptions.
	require.True(t, through.MayChange(digest(fact("payments", "refund_created", "order:o_9", "r", time.Hour, nil)), at))
	require.False(t, through.MayChange(digest(fact("orders", "order_status_changed", "order:o_9", "s", -time.Hour, nil)), at))
}
