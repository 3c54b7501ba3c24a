package report

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// TestLLMMarkdownOpensWithTheJudgeTable: a model-driven run's markdown
// gives the agent's figures, then the judge-versus-CommitLayer table, and
// only then the skipped scenarios and the tokens per scenario.
func TestLLMMarkdownOpensWithTheJudgeTable(t *testing.T) {
	row := matrix.Row{ID: "refund/phantom_success", Process: "refund", Injection: "phantom_success", Family: "agent",
		Truth:   matrix.Truth{Outcome: commitlayer.StatusFail, Policy: commitlayer.StatusPass, Knowable: true, OutcomeKnowable: true, PolicyKnowable: true},
		Verdict: matrix.Verdict{Status: commitlayer.StatusFail, Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusFail, Policy: commitlayer.StatusPass}},
		Agree:   matrix.Agree{Outcome: true, Policy: true},
		Judges:  []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "believed the 200"}},
		LLM:     &matrix.RowLLM{Provider: "fake-openai", Turns: 4, InputTokens: 900, OutputTokens: 40}}
	res := LLMResults{Results: NewResults("abc", time.Unix(0, 0), time.Unix(10, 0), 1, []matrix.Row{row}),
		Agent: LLMRun{Provider: "fake-openai", Model: "fake-openai", Applicable: 1,
			Skipped: []catalogue.Skipped{{ID: "refund/no_calls_claims_success", Reason: "scripts an agent that makes no call"}}}}
	md := LLMMarkdown(res)
	head := strings.Index(md, "# Model-driven agent: fake-openai")
	judges := strings.Index(md, "## Trace-only judges versus CommitLayer")
	skipped := strings.Index(md, "## catalogue.Skipped")
	tokens := strings.Index(md, "## Tokens per scenario")
	require.True(t, head == 0 && judges > head && skipped > judges && tokens > skipped, md)
	require.Contains(t, md, "| refund/phantom_success | 4 |")
}
