package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestVerdictPassLatency: the time a pass took is kept in its verdict's row
// (plus the store's own time up to the insert), out of the verdict's JSON;
// an append that measures nothing keeps none.
func TestVerdictPassLatency(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_p", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)

	v1, appended, err := testDB.AppendVerdict(ctx, tn.ID, mkVerdict("act_p", commitlayer.StatusUnknown, t0))
	require.NoError(t, err)
	require.True(t, appended)
	_, appended, err = testDB.AppendVerdictOver(ctx, tn.ID, mkVerdict("act_p", commitlayer.StatusPass, t0.Add(time.Second)), &v1, 3*time.Millisecond)
	require.NoError(t, err)
	require.True(t, appended)

	passUS := func(version int) *int64 {
		var us *int64
		require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT pass_us FROM verdicts WHERE tenant_id = $1 AND action_id = 'act_p' AND version = $2`,
			tn.ID, version).Scan(&us))
		return us
	}
	require.Nil(t, passUS(1))
	require.NotNil(t, passUS(2))
	require.GreaterOrEqual(t, *passUS(2), int64(3000), "the store's time before the insert counts too")

	var body string
	require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT body::text FROM verdicts WHERE tenant_id = $1 AND action_id = 'act_p' AND version = 2`, tn.ID).Scan(&body))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	require.NotContains(t, m, "pass_latency")
}
