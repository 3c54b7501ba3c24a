package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestLLMMarkdownOpensWithTheJudgeTable: a model-driven run's markdown
// gives the agent's figures, then the judge-versus-CommitLayer table, and
// only then the skipped scenarios and the tokens per scenario.
func TestLLMMarkdownOpensWithTheJudgeTable(t *testing.T) {
	row := Row{ID: "refund/phantom_success", Workflow: "refund", Injection: "phantom_success", Family: "agent",
		Truth:   RowTruth{Outcome: commitlayer.StatusFail, Policy: commitlayer.StatusPass, Knowable: true, OutcomeKnowable: true, PolicyKnowable: true},
		Verdict: RowVerdict{Status: commitlayer.StatusFail, Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusFail, Policy: commitlayer.StatusPass}},
		Agree:   RowAgree{Outcome: true, Policy: true},
		Judges:  []JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "believed the 200"}},
		LLM:     &RowLLM{Provider: "fake-openai", Turns: 4, InputTokens: 900, OutputTokens: 40}}
	res := LLMResults{Results: NewResults("abc", time.Unix(0, 0), time.Unix(10, 0), 1, []Row{row}),
		Agent: LLMRun{Provider: "fake-openai", Model: "fake-openai", Applicable: 1,
			Skipped: []Skipped{{ID: "refund/no_calls_claims_success", Reason: "scripts an agent that makes no call"}}}}
	md := LLMMarkdown(res)
	head := strings.Index(md, "# Model-driven agent: fake-openai")
	judges := strings.Index(md, "## Trace-only judges versus CommitLayer")
	skipped := strings.Index(md, "## Skipped")
	tokens := strings.Index(md, "## Tokens per scenario")
	require.True(t, head == 0 && judges > head && skipped > judges && tokens > skipped, md)
	require.Contains(t, md, "| refund/phantom_success | 4 |")
}
