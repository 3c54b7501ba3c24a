package harness

import (
	"encoding/json"
	"fmt"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/judge"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

// JudgeVerdict is a trace-only judge's answer on one row: what an
// evaluator that reads only the trajectory would have said.
type JudgeVerdict struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// ruleJudge runs the offline rule judge (llm/judge) on the agent's
// trajectory: it believes 2xx answers and the agent's report, and fails a
// visible error. It runs on every row, so every run compares CommitLayer
// with a trace-based evaluator.
func ruleJudge(tr llm.Trajectory) JudgeVerdict {
	r := judge.Evaluate(tr)
	return JudgeVerdict{Name: r.Judge, Verdict: r.Verdict, Reason: r.Reason}
}

// reportRun is the results in the report package's shape (the same JSON
// names), for the judge table and the HTML page.
func reportRun(res Results) (report.Run, error) {
	raw, err := json.Marshal(res)
	if err != nil {
		return report.Run{}, fmt.Errorf("report: encode results: %w", err)
	}
	return report.Decode(raw)
}
