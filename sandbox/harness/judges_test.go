package harness

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// TestRuleJudgeOnScriptedTrajectories: the scripted agent's trajectory
// reaches the rule judge intact — a phantom success (200, nothing done) is
// believed, a visible 500 with no later success fails, a retry that
// succeeded is believed, a report of failure fails.
func TestRuleJudgeOnScriptedTrajectories(t *testing.T) {
	refund := func(status int, errText string) llm.Attempt {
		return llm.Attempt{Tool: "refund", Args: map[string]any{"order_id": "o_1001", "amount": 2500}, Attempt: 1,
			Method: "POST", Path: "/payments/refunds", Status: status, Error: errText}
	}
	success := llm.Report{Status: "success", Message: "refunded"}
	for name, tc := range map[string]struct {
		tr   llm.Trajectory
		want commitlayer.Status
	}{
		"phantom success is believed": {llm.Trajectory{Calls: []llm.Attempt{refund(200, "")}, Report: success}, "PASS"},
		"a visible 500 fails":         {llm.Trajectory{Calls: []llm.Attempt{refund(500, "")}, Report: success}, "FAIL"},
		"a lost response retried":     {llm.Trajectory{Calls: []llm.Attempt{refund(0, "timeout"), refund(201, "")}, Report: success}, "PASS"},
		"a report of failure":         {llm.Trajectory{Calls: []llm.Attempt{refund(403, "")}, Report: llm.Report{Status: "failure"}}, "FAIL"},
	} {
		t.Run(name, func(t *testing.T) {
			tr := tc.tr
			v := ruleJudge(tr)
			require.Equal(t, "rule", v.Name)
			require.Equal(t, tc.want, v.Verdict, v.Reason)
			require.NotEmpty(t, v.Reason)
		})
	}
}
