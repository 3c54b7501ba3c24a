package benchstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore/benchstoretest"
)

// TestAgentStepsWriteAhead: a step is begun once; a retry before its answer
// is recorded learns it was started; after, it reads the answer; the first
// answer stays; another request at the same index is refused.
func TestAgentStepsWriteAhead(t *testing.T) {
	db := benchstoretest.Store(t)
	ctx := context.Background()
	run := fmt.Sprintf("run_%d", time.Now().UnixNano())
	hash := []byte("request-1")

	res, started, err := db.BeginAgentStep(ctx, run, "refund/baseline", "turn", 0, hash)
	require.NoError(t, err)
	require.Nil(t, res)
	require.False(t, started, "the first attempt begins it")

	res, started, err = db.BeginAgentStep(ctx, run, "refund/baseline", "turn", 0, hash)
	require.NoError(t, err)
	require.Nil(t, res)
	require.True(t, started, "a retry learns an attempt began and left no answer")

	stored, err := db.CompleteAgentStep(ctx, run, "refund/baseline", "turn", 0, json.RawMessage(`{"text":"first"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"first"}`, string(stored))
	stored, err = db.CompleteAgentStep(ctx, run, "refund/baseline", "turn", 0, json.RawMessage(`{"text":"second"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"first"}`, string(stored), "the first answer stays")

	res, started, err = db.BeginAgentStep(ctx, run, "refund/baseline", "turn", 0, hash)
	require.NoError(t, err)
	require.False(t, started)
	require.JSONEq(t, `{"text":"first"}`, string(res), "a retry reads the recorded answer")

	_, _, err = db.BeginAgentStep(ctx, run, "refund/baseline", "turn", 0, []byte("another request"))
	require.True(t, errors.Is(err, commitlayer.ErrInvalid), "%v", err)

	// Calls and turns, scenarios and runs are apart.
	_, started, err = db.BeginAgentStep(ctx, run, "refund/baseline", "call", 0, hash)
	require.NoError(t, err)
	require.False(t, started)
	require.Equal(t, 1, benchstoretest.CountAgentSteps(t, db, run, "refund/baseline", "turn"))

	for _, bad := range []struct {
		run, sc, kind string
		idx           int
	}{{"", "s", "turn", 0}, {run, "", "turn", 0}, {run, "s", "other", 0}, {run, "s", "turn", -1}} {
		_, _, err := db.BeginAgentStep(ctx, bad.run, bad.sc, bad.kind, bad.idx, hash)
		require.True(t, errors.Is(err, commitlayer.ErrInvalid), "%+v: %v", bad, err)
	}
	_, err = db.CompleteAgentStep(ctx, run, "never/begun", "turn", 0, json.RawMessage(`{}`))
	require.True(t, errors.Is(err, commitlayer.ErrNotFound), "%v", err)
	_, err = db.CompleteAgentStep(ctx, run, "refund/baseline", "call", 0, json.RawMessage(`{not json`))
	require.True(t, errors.Is(err, commitlayer.ErrInvalid), "%v", err)
}
