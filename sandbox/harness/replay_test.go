package harness

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// recordedRow is what a stored run keeps of a scenario's agent: its
// trajectory, through JSON as a stored run has it (numbers as float64).
func recordedRow(t *testing.T, l *Live) matrix.Row {
	t.Helper()
	tr := l.Env.Result.Trajectory
	raw, err := json.Marshal(matrix.Row{ID: l.Scenario.ID, Trajectory: &tr, Judges: []matrix.JudgeVerdict{ruleJudge(tr),
		{Name: "model:fake/judge", Verdict: "FAIL", Reason: "recorded"}}})
	require.NoError(t, err)
	var row matrix.Row
	require.NoError(t, json.Unmarshal(raw, &row))
	return row
}

// Replaying every scenario of the catalogue on a fresh enterprise answers
// every recorded call as it was answered the first time, and the oracle
// finds the same truth and the same stray effects: the replay is faithful,
// so a verdict on it is a verdict on the recorded run.
func TestReplayIsFaithfulOnEveryScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole catalogue twice")
	}
	ctx := context.Background()
	families := map[string]bool{}
	for _, sc := range catalogue.Catalogue() {
		t.Run(sc.ID, func(t *testing.T) {
			orig := start(t, sc)
			_, err := orig.RunAgent(ctx)
			require.NoError(t, err)
			if sc.AfterSettlement != nil {
				_, err = orig.AfterSettlement(ctx)
				require.NoError(t, err)
			}
			truth, stray, err := orig.Truth(ctx)
			require.NoError(t, err)
			rec := recordedRow(t, orig)

			again := start(t, sc)
			res, divergent, err := again.Replay(ctx, "run-1", rec)
			require.NoError(t, err)
			require.Zero(t, divergent, "%v", again.replayed.diffs)
			require.Equal(t, orig.Env.Result.Action.Claim, res.Action.Claim)
			require.Equal(t, orig.Env.Result.Action.Params, res.Action.Params)
			require.Len(t, res.Trajectory.Calls, len(orig.Env.Result.Trajectory.Calls))
			if sc.AfterSettlement != nil {
				_, err = again.AfterSettlement(ctx)
				require.NoError(t, err)
			}
			truth2, stray2, err := again.Truth(ctx)
			require.NoError(t, err)
			require.Equal(t, truth, truth2)
			require.Equal(t, stray, stray2)
			require.Equal(t, noPorts(orig.ChaosLog()), noPorts(again.ChaosLog()), "the same chaos rules fired on the same calls")

			// The row keeps the recorded trajectory and judges.
			row := matrix.Row{ID: sc.ID}
			again.replay().amend(&row)
			require.Equal(t, rec.Trajectory, row.Trajectory)
			require.Equal(t, rec.Judges, row.Judges, "the rule judge agrees and the model judge is carried over")
			require.Equal(t, &matrix.RowReplay{Of: "run-1", Calls: len(rec.Trajectory.Calls)}, row.Replay)

			// Again is the same answer (a retried activity).
			res2, d2, err := again.Replay(ctx, "run-1", rec)
			require.NoError(t, err)
			require.Equal(t, res, res2)
			require.Zero(t, d2)
		})
		families[sc.Family] = true
	}
	require.GreaterOrEqual(t, len(families), 5)
}

// A recording that the systems now answer differently is counted and
// described, not hidden: here the recorded answers were edited.
func TestReplayCountsDivergentCalls(t *testing.T) {
	ctx := context.Background()
	sc := lookup(t, "refund/lost_response_retry_no_key")
	orig := start(t, sc)
	_, err := orig.RunAgent(ctx)
	require.NoError(t, err)
	rec := recordedRow(t, orig)
	require.GreaterOrEqual(t, len(rec.Trajectory.Calls), 2)
	rec.Trajectory.Calls[0].Response = `{"id":"something else"}`
	rec.Trajectory.Calls[1].Status = 418
	// A call that never became a request is kept, not sent.
	rec.Trajectory.Calls = append(rec.Trajectory.Calls, llm.Attempt{Tool: "no_such_tool", Attempt: 1, Error: "unknown tool"})

	again := start(t, sc)
	res, divergent, err := again.Replay(ctx, "run-2", rec)
	require.NoError(t, err)
	require.Equal(t, 2, divergent)
	require.Len(t, res.Trajectory.Calls, len(rec.Trajectory.Calls))
	row := matrix.Row{}
	again.replay().amend(&row)
	require.Equal(t, 2, row.Replay.Divergent)
	require.Equal(t, len(rec.Trajectory.Calls)-1, row.Replay.Calls)
	require.Len(t, row.Replay.Diffs, 2)
	require.Contains(t, row.Replay.Diffs[0], "recorded body")
	require.Contains(t, row.Replay.Diffs[1], "recorded status 418")
}

func TestReplayNeedsATrajectory(t *testing.T) {
	l := start(t, lookup(t, "refund/lost_response_retry_no_key"))
	_, _, err := l.Replay(context.Background(), "run-3", matrix.Row{ID: "refund/lost_response_retry_no_key"})
	require.ErrorContains(t, err, "no recorded trajectory")
}

var port = regexp.MustCompile(`127\.0\.0\.1:\d+`)

func noPorts(log []string) []string {
	out := make([]string, len(log))
	for i, l := range log {
		out[i] = port.ReplaceAllString(l, "127.0.0.1:PORT")
	}
	return out
}

func TestSameBodyMasksOnlyTimes(t *testing.T) {
	require.True(t, sameBody(`{"a":1,"at":"2026-01-01T00:00:00Z"}`, `{"at":"2026-02-01T10:00:00.5Z", "a":1}`))
	require.False(t, sameBody(`{"a":1}`, `{"a":2}`))
	require.False(t, sameBody(`{"id":"n_1"}`, `{"id":"n_2"}`))
	require.False(t, sameBody(`plain`, `other`))
	require.True(t, sameBody(`plain`, `plain`))
}

// A model-driven agent's trajectory (model turns, tool calls tied to the
// model's call ids) replays the same way: its attempts are re-executed,
// its turns stay on the row untouched, and no model is involved.
func TestReplayModelDrivenTrajectory(t *testing.T) {
	ctx := context.Background()
	sc := lookup(t, "refund/rate_limited_retry")
	orig := start(t, sc)
	_, err := orig.RunAgent(ctx)
	require.NoError(t, err)
	rec := recordedRow(t, orig)
	for i := range rec.Trajectory.Calls {
		rec.Trajectory.Calls[i].CallID = "toolu_" + string(rune('a'+i))
	}
	rec.Trajectory.Turns = []llm.Turn{{Index: 1, Sent: []llm.Message{{Role: llm.User, Text: rec.Trajectory.Instruction}},
		Response: llm.Response{Text: "I'll refund it."}}}
	rec.Trajectory.Provider, rec.Trajectory.Model = "anthropic", "fake-anthropic"

	again := start(t, sc)
	_, divergent, err := again.Replay(ctx, "run-m", rec)
	require.NoError(t, err)
	require.Zero(t, divergent, "%v", again.replayed.diffs)
	row := matrix.Row{}
	again.replay().amend(&row)
	require.Equal(t, rec.Trajectory.Turns, row.Trajectory.Turns)
	require.Equal(t, "toolu_a", row.Trajectory.Calls[0].CallID)
	require.Equal(t, rec.Judges[1], row.Judges[1], "the model judge's verdict is carried over")
}

// runStore answers one stored run.
type runStore struct {
	Store
	run benchstore.Run
}

func (s runStore) GetBenchmarkRun(_ context.Context, id string) (benchstore.Run, error) {
	if id != s.run.ID {
		return benchstore.Run{}, commitlayer.ErrNotFound
	}
	return s.run, nil
}

// The recorded row is found by scenario and attempt; a missing run, row or
// trajectory fails for good, naming what is missing.
func TestRecordedRow(t *testing.T) {
	tr := &llm.Trajectory{Instruction: "x"}
	rows := []matrix.Row{{ID: "a", Attempt: 1, Trajectory: tr, Claim: "one"}, {ID: "a", Attempt: 2, Trajectory: tr, Claim: "two"},
		{ID: "b", Trajectory: tr}, {ID: "c", Error: "lost"}}
	raw, err := json.Marshal(rows)
	require.NoError(t, err)
	a := &Activities{Store: runStore{run: benchstore.Run{ID: "r1", Results: raw}}}
	ctx := context.Background()
	r, err := a.recordedRow(ctx, "r1", "a", 2)
	require.NoError(t, err)
	require.Equal(t, "two", r.Claim)
	r, err = a.recordedRow(ctx, "r1", "b", 0)
	require.NoError(t, err)
	require.Equal(t, "b", r.ID)
	for _, tc := range []struct {
		run, id string
		want    string
	}{{"r2", "a", "no benchmark run r2"}, {"r1", "c", "recorded no trajectory for c"}, {"r1", "zzz", "recorded no trajectory for zzz"}} {
		_, err := a.recordedRow(ctx, tc.run, tc.id, 0)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.True(t, appErr.NonRetryable())
		require.Equal(t, ErrNothingToReplay, appErr.Type())
		require.ErrorContains(t, err, tc.want)
	}
}
