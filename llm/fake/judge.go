package fake

import (
	"encoding/json"
	"fmt"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/judge"
)

// RuleJudge answers a judge's turn (structured output) as the rule judge
// would, from the trajectory in the prompt: the fake model judge is
// deterministic and agrees with judge.Evaluate.
type RuleJudge struct{}

var _ Policy = RuleJudge{}

// Reply answers {"verdict","reason"}; a prompt with no trajectory gets an
// answer that is not JSON, as a confused model might give.
func (RuleJudge) Reply(t Turn) (Reply, error) {
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].Role != llm.User {
			continue
		}
		tr, ok := judge.ExtractTrajectory(t.Messages[i].Text)
		if !ok {
			break
		}
		r := judge.Evaluate(tr)
		if r.Verdict == commitlayer.StatusUnknown {
			r.Verdict = commitlayer.StatusFail // the schema allows PASS or FAIL only
		}
		b, err := json.Marshal(map[string]string{"verdict": string(r.Verdict), "reason": r.Reason})
		if err != nil {
			return Reply{}, fmt.Errorf("encode verdict: %w", err)
		}
		return Reply{Text: string(b)}, nil
	}
	return Reply{Text: "I cannot find a trajectory to judge."}, nil
}
