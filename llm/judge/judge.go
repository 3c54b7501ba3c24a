// Package judge holds the trace-only judges: evaluators that see what a
// trace or observability platform sees of an agent's run (the task, each
// tool call with its arguments and answer, the agent's own report) and
// never the systems of record. They are CommitLayer's baseline: a row where
// a judge says PASS and the oracle says the action failed is a failure only
// the systems of record could catch.
//
// Rule is offline and deterministic: it believes a 2xx answer and the
// agent's report, and fails a visible error. Model asks a model through an
// llm.Provider with the provider's structured output (schema
// {"verdict","reason"}, temperature 0 where the provider takes one); an
// answer that does not parse is UNKNOWN.
package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// Result is a judge's verdict on one trajectory.
type Result struct {
	Judge   string             `json:"judge"` // "rule" or "model:<provider>/<model>"
	Verdict commitlayer.Status `json:"verdict"`
	Reason  string             `json:"reason"`
	// Usage and Model are the model judge's.
	Usage llm.Usage `json:"usage,omitzero"`
	Model string    `json:"model,omitempty"`
}

// Judge judges a trajectory.
type Judge interface {
	Judge(ctx context.Context, tr llm.Trajectory) (Result, error)
}

// KeyArg is the argument that carries an idempotency key; a retry that
// differs from the failed call only in it is the same call.
const KeyArg = "idempotency_key"

// Evaluate judges a trajectory as a trace evaluator would: the agent's
// report of failure is a FAIL; a tool call that got an error (no answer,
// 4xx, 5xx) with no later 2xx for the same call is a FAIL; otherwise the 2xx
// answers and a report of success are believed: PASS.
func Evaluate(tr llm.Trajectory) Result {
	r := Result{Judge: "rule"}
	switch tr.Report.Status {
	case commitlayer.ClaimFailure:
		r.Verdict, r.Reason = commitlayer.StatusFail, "the agent reported failure"
		if tr.Report.Message != "" {
			r.Reason += ": " + tr.Report.Message
		}
		return r
	case commitlayer.ClaimSuccess:
	case "":
		r.Verdict, r.Reason = commitlayer.StatusFail, "the agent made no report"
		return r
	default:
		r.Verdict, r.Reason = commitlayer.StatusUnknown, fmt.Sprintf("the agent's report %q is neither success nor failure", tr.Report.Status)
		return r
	}
	for i, c := range tr.Calls {
		if c.OK() {
			continue
		}
		recovered := false
		for _, later := range tr.Calls[i+1:] {
			if later.OK() && sameCall(c, later) {
				recovered = true
				break
			}
		}
		if !recovered {
			r.Verdict = commitlayer.StatusFail
			r.Reason = fmt.Sprintf("visible error with no later success: %s (attempt %d)", c.Failure(), c.Attempt)
			return r
		}
	}
	r.Verdict = commitlayer.StatusPass
	if len(tr.Calls) == 0 {
		r.Reason = "the agent reported success and the trace shows no error (it made no tool calls)"
	} else {
		r.Reason = fmt.Sprintf("every one of %d tool calls ended in a 2xx answer and the agent reported success", len(tr.Calls))
	}
	return r
}

// sameCall reports whether two attempts are the same call: the same tool
// and the same arguments apart from an idempotency key.
func sameCall(a, b llm.Attempt) bool {
	return a.Tool == b.Tool && canonical(a.Args) == canonical(b.Args)
}

func canonical(args map[string]any) string {
	m := make(map[string]any, len(args))
	for k, v := range args {
		if k != KeyArg {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m) // map keys are sorted
	return string(b)
}

// Trajectory tags: the model judge's prompt carries the trajectory as JSON
// between them.
const (
	TrajectoryOpen  = "<trajectory>"
	TrajectoryClose = "</trajectory>"
)

// maxShown bounds each response body shown to the model judge.
const maxShown = 2000

// view is what the model judge is shown: no model turns, bodies cut.
func view(tr llm.Trajectory) llm.Trajectory {
	v := llm.Trajectory{Instruction: tr.Instruction, Report: tr.Report, Calls: make([]llm.Attempt, len(tr.Calls))}
	for i, c := range tr.Calls {
		if len(c.Response) > maxShown {
			c.Response = c.Response[:maxShown] + "…(cut)"
		}
		v.Calls[i] = c
	}
	return v
}

// ExtractTrajectory reads the trajectory out of a judge prompt.
func ExtractTrajectory(text string) (llm.Trajectory, bool) {
	i := strings.Index(text, TrajectoryOpen)
	j := strings.LastIndex(text, TrajectoryClose)
	if i < 0 || j < i {
		return llm.Trajectory{}, false
	}
	var tr llm.Trajectory
	dec := json.NewDecoder(strings.NewReader(text[i+len(TrajectoryOpen) : j]))
	dec.UseNumber()
	if dec.Decode(&tr) != nil {
		return llm.Trajectory{}, false
	}
	return tr, true
}
