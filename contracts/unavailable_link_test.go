package contracts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer/contracts"
)

// A rule that reads a value on a linked subject (the tier of an order's
// customer, linked by the orders feed) cannot be evaluated while the source
// that carries the link is unavailable: that makes the rule UNKNOWN, not a
// violation. Found by the failure matrix (discount/unreachable_verifier).
func TestRuleMissingValueWhileALinkingSourceIsUnavailable(t *testing.T) {
	// world is a discount of o_1003 for gold customer c_17, as the feeds
	// report it, minus the orders feed when it is unavailable.
	world := func(percent int64, ordersDown, ordersNever bool) contracts.Input {
		in := orderWorld("approve_discount", "o_1003", "c_17", "t_13", attrs{"percent": percent, "ticket_id": "t_13"}, "paid")
		in.Facts = append(in.Facts,
			fact("orders", "discount_applied", "order:o_1003", "orders-40", time.Second, attrs{"discount_id": "d_1", "percent": percent}),
			note("tickets-41", "t_13", "order:o_1003", "c_17", 2*time.Second))
		if ordersDown || ordersNever {
			var kept = in.Facts[:0]
			for _, f := range in.Facts {
				if f.Source != "orders" {
					kept = append(kept, f)
				}
			}
			in.Facts = kept
		}
		if ordersDown {
			in.Coverage.Unreachable = map[string]string{"orders": "connection refused"}
		}
		if ordersNever {
			var conn []string
			for _, s := range in.Coverage.Connected {
				if !strings.EqualFold(s, "orders") {
					conn = append(conn, s)
				}
			}
			in.Coverage.Connected = conn
		}
		return in
	}
	runSandboxCases(t, "approve_discount", []sandboxCase{
		{"all sources up: the tier is read through the order's link", func() contracts.Input { return world(15, false, false) }, P, P, nil},
		{"orders unreachable: the customer is unknown, so is the tier", func() contracts.Input { return world(15, true, false) }, U, U,
			[]string{"source_unavailable discount_applied", "source_unavailable customer_tier"}},
		{"orders never reported: the same", func() contracts.Input { return world(15, false, true) }, U, U,
			[]string{"source_unavailable discount_applied", "source_unavailable customer_tier"}},
		{"orders unreachable, and a rule on params alone is false: still a violation", func() contracts.Input { return world(25, true, false) }, U, F,
			[]string{"source_unavailable discount_applied", "policy_violation within_limit", "source_unavailable customer_tier"}},
	})
}
