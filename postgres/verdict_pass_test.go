package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/stretchr/testify/require"
)

// TestVerdictPassLatency: a measured pass is stored with its verdict (plus
// the store's own time up to the insert) and read back by every reader; an
// unmeasured verdict reads zero; the figure stays out of the verdict's JSON.
func TestVerdictPassLatency(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	_, _, err := testDB.CreateAction(ctx, tn.ID, mkAction("act_p", "order:o1", t0), t0, t0, "", nil)
	require.NoError(t, err)

	plain := mkVerdict("act_p", commitlayer.StatusUnknown, t0)
	v1, appended, err := testDB.AppendVerdict(ctx, tn.ID, plain)
	require.NoError(t, err)
	require.True(t, appended)
	require.Zero(t, v1.PassLatency)

	measured := mkVerdict("act_p", commitlayer.StatusPass, t0.Add(time.Second))
	measured.PassLatency = 3 * time.Millisecond
	v2, appended, err := testDB.AppendVerdict(ctx, tn.ID, measured)
	require.NoError(t, err)
	require.True(t, appended)
	require.GreaterOrEqual(t, v2.PassLatency, 3*time.Millisecond, "the store's time before the insert counts too")

	hist, err := testDB.VerdictHistory(ctx, tn.ID, "act_p")
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Zero(t, hist[0].PassLatency)
	require.Equal(t, v2.PassLatency.Truncate(time.Microsecond), hist[1].PassLatency)
	latest, err := testDB.LatestVerdict(ctx, tn.ID, "act_p")
	require.NoError(t, err)
	require.Equal(t, hist[1].PassLatency, latest.PassLatency)
	byID, err := testDB.LatestVerdicts(ctx, tn.ID, []string{"act_p"})
	require.NoError(t, err)
	require.Equal(t, hist[1].PassLatency, byID["act_p"].PassLatency)

	var body string
	require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT body::text FROM verdicts WHERE tenant_id = $1 AND action_id = 'act_p' AND version = 2`, tn.ID).Scan(&body))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	require.NotContains(t, m, "PassLatency")
	require.NotContains(t, m, "pass_latency")
}
