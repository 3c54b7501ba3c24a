package contracts_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// A check's remedy overrides the hint of its findings; the other checks
// keep the code's default.
func TestRemedyOverridesHintPerCheck(t *testing.T) {
	c := mustParse(t, `id: ship
kind: action
settlement: 1h
watch: 1h
sources: [wh]
policy:
  - {id: small, rule: params.qty < 10, remedy: none}
effects:
  - {id: shipped, source: wh, type: shipped, remedy: retry_read}
  - {id: labelled, source: wh, type: labelled, count: 1}
forbids:
  - {id: no_cancel, source: wh, type: cancelled, remedy: human_review}
`)
	v := c.Evaluate(contracts.Input{
		Action:   act("a1", "ship", "bot", "order:o_1", 0, attrs{"qty": int64(12)}),
		Coverage: connected("wh"),
		Now:      t0.Add(2 * time.Hour),
		Facts: []commitlayer.Fact{
			fact("wh", "cancelled", "order:o_1", "c1", time.Minute, attrs{}),
			fact("wh", "labelled", "order:o_1", "l1", time.Minute, attrs{}),
			fact("wh", "labelled", "order:o_1", "l2", 2*time.Minute, attrs{}),
		},
	})
	requireConsistent(t, v)
	hints := map[string]commitlayer.Remedy{}
	for _, f := range v.Findings {
		hints[f.Check] = f.Hint
	}
	require.Equal(t, map[string]commitlayer.Remedy{
		"small":     commitlayer.RemedyNone,        // policy_violation: human_review by default
		"shipped":   commitlayer.RemedyRetryRead,   // missing_effect: human_review by default
		"no_cancel": commitlayer.RemedyHumanReview, // forbidden_effect: compensate by default
		// no override: the code's default
		"labelled": commitlayer.Hint(commitlayer.CodeDuplicateEffect),
	}, hints)
	require.Equal(t, commitlayer.RemedyCompensate, hints["labelled"])
}

func TestRemedyMustBeKnown(t *testing.T) {
	_, err := contracts.Parse([]byte(`id: ship
kind: action
settlement: 1h
watch: 1h
sources: [wh]
effects:
  - {id: shipped, source: wh, type: shipped, remedy: refund}
`))
	require.ErrorContains(t, err, `effects[0].remedy (line 7): unknown remedy "refund" (expected one of retry_read, human_review, compensate, none)`)
}
