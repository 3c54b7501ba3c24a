package activities_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
)

// BenchmarkScreenWakes screens one notice's 100 settled verifications,
// each subject with 20 facts, after a burst of notes on every subject
// (a kind their contract never reads): /digest with the notice's digest,
// /stored without it (every one evaluated over what is stored). Each
// op is one notice; none is woken either way.
func BenchmarkScreenWakes(b *testing.B) {
	fx := newFixture(b)
	t := b
	ctx := context.Background()
	settled := fx.now.Add(-20 * time.Minute)
	var acts []commitlayer.ActionRecord
	var notes []commitlayer.Fact
	for i := range 100 {
		acc := fmt.Sprintf("account:acc_%d", i)
		facts := []commitlayer.Fact{
			ledgerFact("account_opened", acc, "open-"+acc, settled.Add(-time.Hour), commitlayer.Attrs{"status": "active"}),
			ledgerFact("payout_sent", acc, "po-"+acc, settled.Add(time.Second), commitlayer.Attrs{"amount": 500}),
		}
		for k := range 18 {
			facts = append(facts, ledgerFact("balance_changed", acc, fmt.Sprintf("bal-%s-%d", acc, k), settled.Add(-time.Duration(k)*time.Minute), commitlayer.Attrs{"balance": k}))
		}
		_, err := fx.db.InsertFacts(ctx, fx.tenant, facts)
		require.NoError(b, err)
		id := fx.action(t, fmt.Sprintf("agent-%d", i), acc, 500, settled)
		res := fx.evaluate(t, id, activities.EvaluateInput{})
		require.False(b, res.Verdict.Provisional)
		acts = append(acts, fx.record(t, id))
		notes = append(notes, ledgerFact("note_added", acc, "note-"+acc, fx.now, commitlayer.Attrs{"text": "called"}))
	}
	_, err := fx.db.InsertFacts(ctx, fx.tenant, notes)
	require.NoError(b, err)
	digest := commitlayer.DigestFacts(notes)
	screen := &activities.Screen{Activities: fx.acts, Store: fx.db}
	for _, bc := range []struct {
		name   string
		digest *commitlayer.FactsDigest
	}{{"digest", digest}, {"stored", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				for i, w := range screen.Wakes(ctx, fx.tenant, acts, bc.digest) {
					if w {
						b.Fatalf("verification %d woken", i)
					}
				}
			}
		})
	}
}
