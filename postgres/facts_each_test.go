package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestFactsAboutEachIsFactsAboutOfEach: over a tangle of facts linking a
// dozen subjects every which way (chains, cycles, self-links, links
// named twice), the one-query split gives for each subject exactly what
// FactsAbout of that subject alone gives, in the same order.
func TestFactsAboutEachIsFactsAboutOfEach(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	rng := rand.New(rand.NewPCG(7, 23))
	subject := func() commitlayer.Subject {
		kinds := []string{"order", "customer", "ticket"}
		return commitlayer.Subject(fmt.Sprintf("%s:s%d", kinds[rng.IntN(3)], rng.IntN(4)))
	}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var facts []commitlayer.Fact
	for i := range 120 {
		var links []commitlayer.Subject
		for range rng.IntN(4) {
			links = append(links, subject())
		}
		if rng.IntN(10) == 0 && len(links) > 0 {
			links = append(links, links[0]) // named twice
		}
		// Equal times on purpose: the order falls back to seq.
		facts = append(facts, mkFact("src", "kind", string(subject()), fmt.Sprintf("f%d", i),
			t0.Add(time.Duration(rng.IntN(30))*time.Minute), commitlayer.Attrs{"i": i}, links...))
	}
	_, err := db.InsertFacts(ctx, tn.ID, facts)
	require.NoError(t, err)

	var subjects []commitlayer.Subject
	for _, k := range []string{"order", "customer", "ticket"} {
		for i := range 5 { // s4 has no fact at all
			subjects = append(subjects, commitlayer.Subject(fmt.Sprintf("%s:s%d", k, i)))
		}
	}
	subjects = append(subjects, subjects[0]) // asked twice
	each, err := db.FactsAboutEach(ctx, tn.ID, subjects)
	require.NoError(t, err)
	require.Len(t, each, len(subjects)-1)
	nonEmpty := 0
	for _, s := range subjects {
		alone, err := db.FactsAbout(ctx, tn.ID, []commitlayer.Subject{s})
		require.NoError(t, err)
		ids := func(fs []commitlayer.Fact) []string {
			out := []string{}
			for _, f := range fs {
				out = append(out, f.ExternalID)
			}
			return out
		}
		require.Equal(t, ids(alone), ids(each[s]), "facts about %s", s)
		if len(alone) > 0 {
			nonEmpty++
		}
	}
	require.Greater(t, nonEmpty, 8, "the tangle reached most subjects")
}
