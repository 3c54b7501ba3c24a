package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestLinkLookupsUseThePartialIndex: facts_link_keys and
// facts_linked_subject hold linked facts only (migration 0014), and a
// query can use them only when it says `link_keys <> '{}'` itself. With sequential scans priced out, every
// query that looks facts up by link must still reach facts through it: a
// lookup that lost the clause would read the whole table.
func TestLinkLookupsUseThePartialIndex(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, err := db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		mkFact("orders", "order_created", "order:o1", "o1", t0, nil, "customer:c1"),
		mkFact("orders", "note_added", "order:o1", "n1", t0, nil),
	})
	require.NoError(t, err)
	// A tenant big enough that reading all its facts is not the cheapest
	// plan, and statistics that know it.
	bulk := make([]commitlayer.Fact, 4000)
	for i := range bulk {
		bulk[i] = mkFact("orders", "note_added", fmt.Sprintf("order:b%d", i), fmt.Sprintf("b%d", i), t0, nil)
	}
	_, err = db.InsertFacts(ctx, tn.ID, bulk)
	require.NoError(t, err)
	_, err = db.pool.Exec(ctx, `ANALYZE facts`)
	require.NoError(t, err)

	var def string
	require.NoError(t, db.pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = 'facts_link_keys'`).Scan(&def))
	require.Contains(t, def, "WHERE (link_keys <> '{}'::text[])", "the links index is partial")

	subs := []string{"order:o1"}
	keys := linkKeys(tn.ID, subs)
	for name, sql := range map[string]string{
		"FactsAbout": factsAboutSQL, "LinkedSubjects": linkedSubjectsSQL, "factClosure": factClosureSQL,
	} {
		plan := explainWithoutSeqScans(t, db, sql, tn.ID, subs, keys)
		require.Contains(t, plan, "facts_link_keys", "%s does not look links up through the index:\n%s", name, plan)
		require.Contains(t, plan, "facts_linked_subject", "%s reads every fact on its subjects for their links:\n%s", name, plan)
	}

	// And the answers are those of the full index: a fact that links
	// nothing is found by subject, never by link.
	got, err := db.LinkedSubjects(ctx, tn.ID, []commitlayer.Subject{"customer:c1"})
	require.NoError(t, err)
	require.Equal(t, []commitlayer.Subject{"order:o1"}, got)
	facts, err := db.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"customer:c1"})
	require.NoError(t, err)
	require.Len(t, facts, 2, "the linking fact and, one hop on, the order's other fact")
}

func explainWithoutSeqScans(t *testing.T, db *DB, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}
