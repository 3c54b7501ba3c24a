package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// BenchmarkLinksOfLongHistories reads, for subjects with long histories
// of which one fact links (200 subjects × 200 facts: a balance that
// changes, an account opened for a customer), what a pass and a notice
// read: FactsAbout of one subject, and LinkedSubjects of 100.
func BenchmarkLinksOfLongHistories(b *testing.B) {
	testDB := testStore(b)
	ctx := context.Background()
	tn := newTenant(b)
	for k := range 40 {
		batch := make([]commitlayer.Fact, 1000)
		for i := range batch {
			n := k*1000 + i
			subject, j := n%200, n/200
			batch[i] = mkFact("ledger", "balance_changed", fmt.Sprintf("account:a%d", subject), fmt.Sprintf("b_%d", n), t0,
				commitlayer.Attrs{"balance": n})
			if j == 0 {
				batch[i].Type = "account_opened"
				batch[i].Links = []commitlayer.Subject{commitlayer.Subject(fmt.Sprintf("customer:c%d", subject))}
			}
		}
		_, err := testDB.InsertFacts(ctx, tn.ID, batch)
		require.NoError(b, err)
	}
	_, err := testDB.Pool().Exec(ctx, `VACUUM ANALYZE facts`)
	require.NoError(b, err)
	hundred := make([]commitlayer.Subject, 100)
	for i := range hundred {
		hundred[i] = commitlayer.Subject(fmt.Sprintf("account:a%d", i))
	}
	b.Run("FactsAbout", func(b *testing.B) {
		for b.Loop() {
			facts, err := testDB.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"account:a7"})
			require.NoError(b, err)
			require.Len(b, facts, 200)
		}
	})
	b.Run("LinkedSubjects", func(b *testing.B) {
		for b.Loop() {
			subs, err := testDB.LinkedSubjects(ctx, tn.ID, hundred)
			require.NoError(b, err)
			require.Len(b, subs, 100)
		}
	})
}
