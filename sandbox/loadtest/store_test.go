package loadtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/internal/teststore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestStoreReads: what the load test reads of the product's tables, on
// the test store.
func TestStoreReads(t *testing.T) {
	db := teststore.Own(t) // it counts notices, which other test processes' reconcilers would take
	ctx := context.Background()
	tn, _, err := db.CreateTenant(ctx, "loadtest")
	require.NoError(t, err)
	other, _, err := db.CreateTenant(ctx, "loadtest other")
	require.NoError(t, err)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

	// loadFacts: the tenant's history through the store's insert.
	n, err := loadFacts(ctx, db, tn.ID, tenantFacts("acc", 30, 2*loadBatch+7, at))
	require.NoError(t, err)
	require.EqualValues(t, 2*loadBatch+7, n)
	got, err := db.FactsAbout(ctx, tn.ID, []commitlayer.Subject{"customer:acc_c7"})
	require.NoError(t, err)
	require.NotEmpty(t, got, "the links are stored")
	size, err := factStoreSize(ctx, db)
	require.NoError(t, err)
	require.GreaterOrEqual(t, size.Facts, n)
	require.Positive(t, size.TableBytes)
	require.Positive(t, size.IndexBytes)
	require.Contains(t, size.Indexes, "facts_link_keys")
	require.Contains(t, size.indexSizes(), "link_keys")
	require.Positive(t, size.bytesPerFact())

	// othersPastRetention: the facts a purge would drop besides the run's.
	mine, err := othersPastRetention(ctx, db, []string{tn.ID, other.ID}, time.Hour)
	require.NoError(t, err)
	all, err := othersPastRetention(ctx, db, []string{other.ID}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, mine+n, all, "the tenant's old facts count once it is not the run's")

	// verdictStages: which actions have a verdict, and a final one.
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		a := commitlayer.Action{ID: id, Contract: "c", ContractVersion: 1, Agent: "bench", Subject: "account:acc_1",
			RequestedAt: at, Params: commitlayer.Attrs{}, Claim: commitlayer.Claim{Status: commitlayer.ClaimSuccess}}
		_, _, err := db.CreateAction(ctx, tn.ID, a, at, at, "", nil)
		require.NoError(t, err)
	}
	verdict := func(id string, s commitlayer.Status, provisional bool) commitlayer.Verdict {
		return commitlayer.Verdict{ActionID: id, Contract: "c", ContractVersion: 1, Status: s, Provisional: provisional,
			Lenses: commitlayer.Lenses{Outcome: s, Policy: commitlayer.StatusPass}, Findings: []commitlayer.Finding{},
			UnavailableSources: []string{}, EvaluatedAt: at, SettlesAt: at}
	}
	for _, v := range []commitlayer.Verdict{
		verdict("a1", commitlayer.StatusUnknown, true), verdict("a1", commitlayer.StatusPass, false), // final
		verdict("a2", commitlayer.StatusUnknown, true), // provisional only
		verdict("a3", commitlayer.StatusFail, false),   // final at once
	} {
		_, appended, err := db.AppendVerdict(ctx, tn.ID, v)
		require.NoError(t, err)
		require.True(t, appended, fmt.Sprint(v.ActionID))
	}
	stages, err := verdictStages(ctx, db, tn.ID, []string{"a1", "a2", "a3", "a4", "nope"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"a1": true, "a2": false, "a3": true}, stages)
	stages, err = verdictStages(ctx, db, other.ID, []string{"a1", "a2", "a3"})
	require.NoError(t, err)
	require.Empty(t, stages, "another tenant's ids are not this tenant's")
	stages, err = verdictStages(ctx, db, tn.ID, nil)
	require.NoError(t, err)
	require.Empty(t, stages)
	pending, err := db.PendingNotifications(ctx, tn.ID)
	require.NoError(t, err)
	require.Positive(t, pending, "the loaded facts' notices wait for a reconciler (noticesDrained)")
}
