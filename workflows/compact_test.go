package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/activities"
)

// pass composes the scripted pull and evaluation as activities.Pass does:
// the pull first when asked, its unreachable sources handed to the
// evaluation.
func (w *world) pass(ctx context.Context, in activities.PassInput) (activities.PassResult, error) {
	var out activities.PassResult
	if in.Pull {
		ex, err := w.extract(ctx, in.Extract)
		if err != nil {
			return out, err
		}
		out.Pulled, out.Unreachable, out.PulledAt = true, ex.Unreachable, ex.StartedAt
		in.Evaluate.Unreachable = ex.Unreachable
	}
	ev, err := w.evaluate(ctx, in.Evaluate)
	out.Evaluate = ev
	return out, err
}

// TestVerifyOldPathStillRuns: a run that recorded no compact-history marker (started
// before the change) keeps two activities per pass and the final pass.
func TestVerifyOldPathStillRuns(t *testing.T) {
	w, env, in := newWorld(t, pass)
	env.OnGetVersion(changeCompactHistory, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Len(t, w.extracts, 2)
	require.Len(t, w.evals, 3, "provisional, final, and the pass before completing")
	require.Equal(t, 3, res.Passes)
}

// TestVerifyCompactSkipsFinalPassWhenNothingCanBeNew: with no watch after the
// window, the settlement pass already ran at the watch's end: no pass
// re-reads the same facts before completing.
func TestVerifyCompactSkipsFinalPassWhenNothingCanBeNew(t *testing.T) {
	w, env, in := newWorld(t, pass)
	in.WatchUntil = in.SettlesAt
	env.ExecuteWorkflow(VerifyAction, in)
	res := result(t, env)
	require.Len(t, w.extracts, 2)
	require.Len(t, w.evals, 2, "provisional and final; nothing after")
	require.False(t, w.evals[1].Provisional)
	require.Equal(t, 2, res.Passes)
}
