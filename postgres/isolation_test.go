package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/stretchr/testify/require"
)

// TestTenantIsolation gives tenant A one of everything, then calls every
// tenant-scoped method as tenant B with A's identifiers: B sees nothing of
// A's, cannot change A's rows, and B's writes under the same names are B's
// own. A's rows are unchanged at the end.
func TestTenantIsolation(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	a, b := newTenant(t), newTenant(t)
	fillTenant(t, a.ID)
	connA, err := testDB.ListConnectors(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, connA, 1)
	_, err = testDB.InsertFacts(ctx, a.ID, []commitlayer.Fact{
		mkFact("tickets", "opened", "ticket:t9", "t-1", t0, nil, "order:o1"),
	})
	require.NoError(t, err)
	countsA := rowCounts(t, a.ID)
	actionA, err := testDB.GetAction(ctx, a.ID, "act_fill")
	require.NoError(t, err)
	historyA, err := testDB.VerdictHistory(ctx, a.ID, "act_fill")
	require.NoError(t, err)
	factsA, err := testDB.FactsAbout(ctx, a.ID, []commitlayer.Subject{"order:o1", "ticket:t9"})
	require.NoError(t, err)
	require.Len(t, factsA, 2)

	subjects := []commitlayer.Subject{"order:o1", "ticket:t9"}
	cases := []struct {
		name string
		call func(tenantID string) (any, error)
		// wantErr is what B gets; nil means B gets an empty result.
		wantErr error
	}{
		{"GetContract", func(id string) (any, error) { return testDB.GetContract(ctx, id, "refund_customer", 0) }, commitlayer.ErrNotFound},
		{"GetContract v1", func(id string) (any, error) { return testDB.GetContract(ctx, id, "refund_customer", 1) }, commitlayer.ErrNotFound},
		{"ListContracts", func(id string) (any, error) { return testDB.ListContracts(ctx, id) }, nil},
		{"FactsAbout", func(id string) (any, error) { return testDB.FactsAbout(ctx, id, subjects) }, nil},
		{"FactsOfKinds", func(id string) (any, error) {
			return testDB.FactsOfKinds(ctx, id, []commitlayer.FactType{{Source: "payments", Type: "refund_created"}, {Source: "tickets", Type: "opened"}}, time.Time{}, time.Time{})
		}, nil},
		{"FactsByExternalID", func(id string) (any, error) { return testDB.FactsByExternalID(ctx, id, "payments", "re_1") }, commitlayer.ErrNotFound},
		{"GetAction", func(id string) (any, error) { return testDB.GetAction(ctx, id, "act_fill") }, commitlayer.ErrNotFound},
		{"PriorActions", func(id string) (any, error) {
			return testDB.PriorActions(ctx, id, "refund_customer", "agent-1", "order:o1", time.Time{}, time.Time{}, "")
		}, nil},
		{"ActionsOfContract", func(id string) (any, error) { return testDB.ActionsOfContract(ctx, id, "refund_customer", time.Time{}) }, nil},
		{"WatchedActions", func(id string) (any, error) { return testDB.WatchedActions(ctx, id, subjects, t0) }, nil},
		{"CountWatchedActions", func(id string) (any, error) { return testDB.CountWatchedActions(ctx, id, t0) }, nil},
		{"EndWatch", func(id string) (any, error) { return nil, testDB.EndWatch(ctx, id, "act_fill", t0) }, commitlayer.ErrNotFound},
		{"LatestVerdict", func(id string) (any, error) { return testDB.LatestVerdict(ctx, id, "act_fill") }, commitlayer.ErrNotFound},
		{"VerdictHistory", func(id string) (any, error) { return testDB.VerdictHistory(ctx, id, "act_fill") }, nil},
		{"LatestVerdictHeads", func(id string) (any, error) { return testDB.LatestVerdictHeads(ctx, id, []string{"act_fill"}) }, nil},
		{"AppendVerdict", func(id string) (any, error) {
			v, _, err := testDB.AppendVerdict(ctx, id, mkVerdict("act_fill", commitlayer.StatusFail, t0))
			return v, err
		}, commitlayer.ErrNotFound},
		{"ListConnectors", func(id string) (any, error) { return testDB.ListConnectors(ctx, id) }, nil},
		{"GetConnector", func(id string) (any, error) { return testDB.GetConnector(ctx, id, connA[0].ID) }, commitlayer.ErrNotFound},
		{"RecordPull", func(id string) (any, error) {
			return recordPull(ctx, testDB, id, connA[0].ID, nil, "99", t0)
		}, commitlayer.ErrNotFound},
		{"RecordPullError", func(id string) (any, error) {
			return nil, testDB.RecordPullError(ctx, id, connA[0].ID, "boom", t0)
		}, commitlayer.ErrNotFound},
		{"Sources", func(id string) (any, error) { return testDB.Sources(ctx, id) }, nil},
		{"ConnectedSources", func(id string) (any, error) { return testDB.ConnectedSources(ctx, id) }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// As A, each read finds something (so the case can fail).
			if tc.wantErr == nil {
				got, err := tc.call(a.ID)
				require.NoError(t, err)
				require.NotEmpty(t, got, "tenant A should see its own rows")
			}
			got, err := tc.call(b.ID)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Empty(t, got)
		})
	}

	// B's writes under A's names are B's own.
	rec, created, err := testDB.PutContract(ctx, b.ID, "refund_customer", []byte("other"))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 1, rec.Version)
	res, err := testDB.InsertFacts(ctx, b.ID, []commitlayer.Fact{
		mkFact("payments", "refund_created", "order:o1", "re_1", t0, nil),
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted, "A's external id is not a duplicate for B")
	actB, created, err := testDB.CreateAction(ctx, b.ID, mkAction("act_fill", "order:o1", t0), t0, t0, "k1", []byte("other hash"))
	require.NoError(t, err, "A's action id and idempotency key are free for B")
	require.True(t, created)
	require.Equal(t, b.ID, actB.TenantID)
	_, err = testDB.CreateConnector(ctx, b.ID, commitlayer.Connector{Source: "orders", Kind: "http_events", ID: connA[0].ID})
	require.NoError(t, err, "A's connector id and source are free for B")
	// B's facts on A's subjects do not show up for A.
	facts, err := testDB.FactsAbout(ctx, a.ID, subjects)
	require.NoError(t, err)
	require.Equal(t, factsA, facts)

	require.Equal(t, countsA, rowCounts(t, a.ID))
	gotAction, err := testDB.GetAction(ctx, a.ID, "act_fill")
	require.NoError(t, err)
	require.Equal(t, actionA, gotAction)
	gotHistory, err := testDB.VerdictHistory(ctx, a.ID, "act_fill")
	require.NoError(t, err)
	require.Equal(t, historyA, gotHistory)
	gotConn, err := testDB.GetConnector(ctx, a.ID, connA[0].ID)
	require.NoError(t, err)
	require.Equal(t, connA[0], gotConn)
	gotKey, err := testDB.FactsByExternalID(ctx, a.ID, "payments", "re_1")
	require.NoError(t, err)
	require.Equal(t, int64(2500), gotKey.Attrs["amount"])
}
