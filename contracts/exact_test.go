package contracts_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

const exactContract = `id: pay_exact
kind: action
subject: account
settlement: 10m
watch: 1h
sources: [ledger]
policy:
  - id: at_most_max
    rule: params.amount <= 9223372036854775807
effects:
  - id: payout
    source: ledger
    type: payout_sent
    count: 1
    expect: effect.amount == params.amount
`

// TestLargeAmountsNeverCompareEqual: two different amounts never make an
// expect hold, at the edges of int64 and across ints and doubles (cel-go
// compares Int(2^63−1) and Double(2^63) as equal; the evaluator never
// lets a double beyond 2^53 be compared). On HEAD an amount of 2^64 against
// an effect of 2^64+1 was PASS.
func TestLargeAmountsNeverCompareEqual(t *testing.T) {
	c := mustParse(t, exactContract)
	eval := func(param, effect any) commitlayer.Verdict {
		in := contracts.Input{
			Action: act("a_1", "pay_exact", "agent", "account:acc_1", 0, attrs{"amount": param}),
			Facts: []commitlayer.Fact{
				fact("ledger", "payout_sent", "account:acc_1", "po_1", time.Minute, attrs{"amount": effect}),
			},
			Coverage: connected("ledger"),
		}
		return c.Evaluate(in)
	}
	maxI := int64(math.MaxInt64)
	for _, tc := range []struct {
		name          string
		param, effect any
		pass          bool
	}{
		{"2^63-1 equal", maxI, maxI, true},
		{"2^63-1 vs 2^63-2", maxI, maxI - 1, false},
		{"-2^63 vs -2^63+1", int64(math.MinInt64), int64(math.MinInt64 + 1), false},
		{"int 2^63-1 vs double 2^63", maxI, float64(1 << 63), false},
		{"double 2^63 vs int 2^63-1", float64(1 << 63), maxI, false},
		{"int 2^53+1 vs double 2^53", int64(1<<53 + 1), float64(1 << 53), false},
		{"double 2^64 vs double 2^64 (from 2^64+1)", float64(1 << 64), float64(1<<64 + 1), false},
		{"int 2500 vs double 2500", int64(2500), 2500.0, true},
		{"double 12.5 vs double 12.5", 12.5, 12.5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := eval(tc.param, tc.effect)
			if tc.pass {
				require.Equal(t, commitlayer.StatusPass, v.Lenses.Outcome, "%+v", v.Findings)
				return
			}
			require.NotEqual(t, commitlayer.StatusPass, v.Lenses.Outcome, "different amounts compared equal: %+v", v.Findings)
			require.NotEqual(t, commitlayer.StatusPass, v.Status)
		})
	}
}
