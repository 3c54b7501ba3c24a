package harness

import (
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/judge"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// ruleJudge runs the offline rule judge (llm/judge) on the agent's
// trajectory: it believes 2xx answers and the agent's report, and fails a
// visible error. It runs on every row, so every run compares CommitLayer
// with a trace-based evaluator.
func ruleJudge(tr llm.Trajectory) matrix.JudgeVerdict {
	r := judge.Evaluate(tr)
	return matrix.JudgeVerdict{Name: r.Judge, Verdict: r.Verdict, Reason: r.Reason}
}
