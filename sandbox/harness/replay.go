package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// maxDiffs bounds the divergences a row describes.
const maxDiffs = 5

// replayed is what a replay keeps for the row: the recorded trajectory
// (with a model-driven agent's turns), the recorded row's judges and
// verdict, and the divergences.
type replayed struct {
	of       string
	recorded matrix.Row
	calls    int
	diffs    []string
	diverged int
}

// Replay runs the scenario's earlier tasks, arms the agent's chaos and
// re-executes the recorded trajectory's calls in order, each exactly as it
// was sent (method, path, body, idempotency key), with no model and no
// script deciding anything: the recorded report is the agent's claim. It
// returns the action the agent reports and how many calls answered
// differently from the recording. Calling it again returns the same
// result, like RunAgent; after Replay, RunAgent returns its result too.
func (l *Live) Replay(ctx context.Context, of string, rec matrix.Row) (agent.Result, int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.agentDone {
		if l.replayed == nil {
			return agent.Result{}, 0, errors.New("replay: the agent already ran")
		}
		return l.Env.Result, l.replayed.diverged, nil
	}
	if rec.Trajectory == nil {
		return agent.Result{}, 0, fmt.Errorf("replay: row %s has no recorded trajectory", rec.ID)
	}
	if err := l.runPrior(ctx); err != nil {
		return agent.Result{}, 0, err
	}
	if err := l.armAgentChaos(ctx); err != nil {
		return agent.Result{}, 0, err
	}
	e := l.Env.Enterprise
	client := agent.Client{BaseURL: e.URL(), HTTP: &http.Client{Transport: l.AgentChaos, Timeout: clientTimeout}}
	requestedAt := agent.StartTime(e.Clock())
	st := &replayed{of: of, recorded: rec}
	calls := make([]llm.Attempt, 0, len(rec.Trajectory.Calls))
	for i, at := range rec.Trajectory.Calls {
		want := recordedCall(at)
		if want.Method == "" {
			// A call that never became a request (an unknown tool, a
			// missing argument): nothing to send again.
			calls = append(calls, want)
			continue
		}
		got, err := client.Resend(ctx, want)
		if err != nil {
			l.AgentChaos.Disarm()
			return agent.Result{}, 0, fmt.Errorf("replay call %d: %w", i+1, err)
		}
		st.calls++
		if diff := answerDiff(want, got); diff != "" {
			st.diverged++
			if len(st.diffs) < maxDiffs {
				st.diffs = append(st.diffs, fmt.Sprintf("call %d %s %s: %s", i+1, want.Method, want.Path, diff))
			}
		}
		calls = append(calls, got)
	}
	claim := commitlayer.Claim{Status: rec.Trajectory.Report.Status, Message: rec.Trajectory.Report.Message}
	if claim.Status != commitlayer.ClaimSuccess && claim.Status != commitlayer.ClaimFailure {
		// An agent that stopped without a report claimed nothing done.
		claim = commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "no report: " + rec.Trajectory.Error}
	}
	tr := llm.Trajectory{Instruction: rec.Trajectory.Instruction, Calls: calls,
		Report: llm.Report{Status: claim.Status, Message: claim.Message}}
	act, err := agent.NewAction(l.Scenario.Task, requestedAt, claim, tr)
	if err != nil {
		return agent.Result{}, 0, fmt.Errorf("replay: %w", err)
	}
	l.Env.Result = agent.Result{Action: act, Trajectory: tr}
	l.agentDone = true
	l.replayed = st
	return l.Env.Result, st.diverged, nil
}

// recordedCall is a recorded attempt as it is sent again: without the
// model's call id, which is the conversation's, not the request's.
func recordedCall(a llm.Attempt) llm.Attempt {
	a.CallID = ""
	return a
}

// answerDiff says how a re-executed call's answer differs from the
// recording's: another status, an error where there was an answer (or the
// reverse), another body. Error texts are not compared (they name ports).
func answerDiff(want, got llm.Attempt) string {
	switch {
	case (want.Error == "") != (got.Error == ""):
		return fmt.Sprintf("recorded error %q, replayed error %q", want.Error, got.Error)
	case want.Status != got.Status:
		return fmt.Sprintf("recorded status %d, replayed %d", want.Status, got.Status)
	case !sameBody(want.Response, got.Response):
		return fmt.Sprintf("recorded body %s, replayed %s", clip(want.Response), clip(got.Response))
	}
	return ""
}

// sameBody compares two answers as JSON when both are JSON (key order and
// spacing aside), else byte for byte. A timestamp is compared as being a
// timestamp, not by its value: a fresh enterprise's clock starts when it
// is built, so a note written a second after the task started says so at
// another time than in the recording.
func sameBody(a, b string) bool {
	if a == b {
		return true
	}
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(maskTimes(va))
	jb, _ := json.Marshal(maskTimes(vb))
	return string(ja) == string(jb)
}

// maskTimes replaces every RFC 3339 timestamp in a decoded JSON value.
func maskTimes(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskTimes(e)
		}
	case []any:
		for i, e := range x {
			x[i] = maskTimes(e)
		}
	case string:
		if _, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return "<time>"
		}
	}
	return v
}

func clip(s string) string { return commitlayer.Clip(s, 120) }

// amend makes a replayed row say what it is: the recorded trajectory (the
// trace is the same one; a model-driven agent's turns stay), the rule
// judge on it, the other judges' verdicts carried over from the recording
// (no model is asked again), and the replay's faithfulness.
func (st *replayed) amend(row *matrix.Row) {
	tr := *st.recorded.Trajectory
	row.Trajectory = &tr
	rule := ruleJudge(tr)
	judges := []matrix.JudgeVerdict{rule}
	for _, j := range st.recorded.Judges {
		if j.Name != rule.Name {
			judges = append(judges, j)
		}
	}
	row.Judges = judges
	row.Replay = &matrix.RowReplay{Of: st.of, Calls: st.calls, Divergent: st.diverged, Diffs: st.diffs,
		Recorded: matrix.VerdictBrief{Status: st.recorded.Verdict.Status, Lenses: st.recorded.Verdict.Lenses},
		Agreed:   st.recorded.Agrees()}
}

// ReplayInput names a prepared scenario to replay from a recorded run.
type ReplayInput struct {
	StepInput
	// Of is the recorded run's id; Attempt picks the recorded row when the
	// run repeated its scenarios (0 or 1: the first).
	Of      string
	Attempt int `json:",omitempty"`
}

// ErrNothingToReplay is the error type of a replay whose recorded row is
// missing or has no trajectory: no retry mends it.
const ErrNothingToReplay = "NothingToReplay"

// ReplayAgent takes the agent's place in a replay: it loads the scenario's
// row from the recorded run, re-executes its calls on this scenario's
// fresh enterprise through the same chaos rules (Live.Replay) and records
// the action with the recorded report as its claim, exactly as RunAgent
// records the agent's.
func (a *Activities) ReplayAgent(ctx context.Context, in ReplayInput) (AgentResult, error) {
	l, err := a.get(in.TenantID)
	if err != nil {
		return AgentResult{}, err
	}
	rec, err := a.recordedRow(ctx, in.Of, in.ScenarioID, in.Attempt)
	if err != nil {
		return AgentResult{}, err
	}
	res, _, err := l.Replay(ctx, in.Of, rec)
	if err != nil {
		return AgentResult{}, fmt.Errorf("replay: %w", err)
	}
	recd, err := a.record(ctx, in.StepInput, res.Action, "main")
	if err != nil {
		return AgentResult{}, err
	}
	return AgentResult{Recorded: recd, Claim: res.Action.Claim.Status, Calls: len(res.Trajectory.Calls)}, nil
}

// recordedRow loads one row of a stored run.
func (a *Activities) recordedRow(ctx context.Context, runID, scenarioID string, attempt int) (matrix.Row, error) {
	run, err := a.Store.GetBenchmarkRun(ctx, runID)
	if errors.Is(err, commitlayer.ErrNotFound) {
		return matrix.Row{}, temporal.NewNonRetryableApplicationError("no benchmark run "+runID, ErrNothingToReplay, nil)
	} else if err != nil {
		return matrix.Row{}, fmt.Errorf("load run %s: %w", runID, err)
	}
	rows, err := RecordedRows(run.Results)
	if err != nil {
		return matrix.Row{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("run %s: %v", runID, err), ErrNothingToReplay, nil)
	}
	for _, r := range rows {
		if r.ID == scenarioID && max(r.Attempt, 1) == max(attempt, 1) {
			if r.Trajectory == nil {
				break
			}
			return r, nil
		}
	}
	return matrix.Row{}, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("run %s recorded no trajectory for %s (attempt %d)", runID, scenarioID, max(attempt, 1)), ErrNothingToReplay, nil)
}

// RecordedRows decodes a stored run's rows.
func RecordedRows(results json.RawMessage) ([]matrix.Row, error) {
	if len(results) == 0 {
		return nil, errors.New("no rows stored")
	}
	var rows []matrix.Row
	if err := json.Unmarshal(results, &rows); err != nil {
		return nil, fmt.Errorf("decode rows: %w", err)
	}
	return rows, nil
}

// replay is the replay state, nil when the agent ran for real.
func (l *Live) replay() *replayed {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.replayed
}
