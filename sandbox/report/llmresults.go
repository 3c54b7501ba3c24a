package report

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// LLMResults are a model-driven run's results: llm_<provider>.json, the
// latest.json shape with the agent's provider, model, tokens, cost, the
// applicable count and the skipped scenarios (each row carries its
// trajectory, turns included, and its tokens).
type LLMResults struct {
	matrix.Results
	Agent LLMRun `json:"agent"`
}

// LLMRun is the run-wide figures of a model-driven run.
type LLMRun struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Applicable counts the scenarios a model-driven agent runs of those
	// selected; Skipped are the others, with why.
	Applicable int                 `json:"applicable"`
	Skipped    []catalogue.Skipped `json:"skipped"`
	// NotRun are applicable scenarios the token budget left out.
	NotRun       []string `json:"not_run"`
	MaxTurns     int      `json:"max_turns"`
	MaxTokens    int      `json:"max_tokens"`
	TokenBudget  int64    `json:"token_budget,omitempty"`
	Turns        int      `json:"turns"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	// CostNanoUSD is the estimate at the model's list price (10⁻⁹ USD);
	// unknown for a fake's model.
	CostNanoUSD int64 `json:"cost_nano_usd"`
	CostKnown   bool  `json:"cost_known"`
	// EstimateModel and EstimateNanoUSD price a fake run's tokens at the
	// list price of the real provider's default model: what the same
	// conversations would cost there.
	EstimateModel   string `json:"estimate_model,omitempty"`
	EstimateNanoUSD int64  `json:"estimate_nano_usd,omitempty"`
	// AgentErrors counts rows whose agent stopped without a report.
	AgentErrors int `json:"agent_errors"`
	// Via is the path that recorded the actions ("direct", agent.ViaMCP,
	// agent.ViaOTLP), RecordedBy says it in words; NoAction counts the rows
	// whose agent's calls recorded no action for the task.
	Via        string `json:"via"`
	RecordedBy string `json:"recorded_by"`
	NoAction   int    `json:"no_action,omitempty"`
}

// NewLLMResults adds the model-driven agent's figures to a run's results.
func NewLLMResults(res matrix.Results, spec agent.Spec, skipped []catalogue.Skipped, notRun []string) LLMResults {
	run := LLMRun{Provider: spec.Provider, Model: spec.Model, Applicable: len(res.Scenarios) + len(notRun),
		Via: cmpOr(spec.Via, agent.ViaDirect), RecordedBy: agent.RecordedBy(spec.Via),
		Skipped: skipped, NotRun: notRun, MaxTurns: spec.MaxTurns, MaxTokens: spec.MaxTokens, TokenBudget: spec.TokenBudget}
	if run.Skipped == nil {
		run.Skipped = []catalogue.Skipped{}
	}
	if run.NotRun == nil {
		run.NotRun = []string{}
	}
	var usage llm.Usage
	for _, r := range res.Scenarios {
		if r.LLM == nil {
			continue
		}
		run.Turns += r.LLM.Turns
		usage = usage.Add(llm.Usage{InputTokens: r.LLM.InputTokens, OutputTokens: r.LLM.OutputTokens})
		if r.LLM.AgentError != "" {
			run.AgentErrors++
		}
		if r.LLM.NoAction {
			run.NoAction++
		}
	}
	run.InputTokens, run.OutputTokens = usage.InputTokens, usage.OutputTokens
	cost := llm.CostOf(spec.Model, usage)
	run.CostNanoUSD, run.CostKnown = cost.NanoUSD, cost.Known
	if wire, ok := strings.CutPrefix(spec.Provider, agent.FakePrefix); ok {
		run.EstimateModel = llm.DefaultModels[wire]
		run.EstimateNanoUSD = llm.CostOf(run.EstimateModel, usage).NanoUSD
	}
	return LLMResults{Results: res, Agent: run}
}

// LLMFileBase is the results' file name without extension: llm_<provider>.
func LLMFileBase(provider string) string { return "llm_" + provider }

// LLMViaFileBase is LLMFileBase of a run on a via path:
// llm_<provider>_via-<path> (the direct path's is LLMFileBase's).
func LLMViaFileBase(provider, via string) string {
	if via == "" || via == agent.ViaDirect {
		return LLMFileBase(provider)
	}
	return LLMFileBase(provider) + "_via-" + via
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// WriteLLMFiles writes llm_<provider>.json and .md into dir.
func WriteLLMFiles(dir string, res LLMResults) error {
	return writeJSONAndMarkdown(dir, LLMViaFileBase(res.Agent.Provider, res.Agent.Via), res, LLMMarkdown(res))
}

// usd is a cost in nano-USD as llm.Cost prints it.
func usd(nano int64) string { return llm.Cost{NanoUSD: nano, Known: true}.String() }

// LLMMarkdown is the results' markdown: the model-driven agent's figures,
// then the matrix's tables (opening with the judge-versus-CommitLayer
// table), then the skipped scenarios and the tokens per scenario.
func LLMMarkdown(res LLMResults) string {
	a := res.Agent
	var b strings.Builder
	fmt.Fprintf(&b, "# Model-driven agent: %s (%s)\n\n", a.Provider, a.Model)
	ran := len(res.Scenarios)
	fmt.Fprintf(&b, "- applicable scenarios: %d (run: %d, not run for the token budget: %d); skipped: %d\n", a.Applicable, ran, len(a.NotRun), len(a.Skipped))
	fmt.Fprintf(&b, "- bounds: %d turns per scenario, %d output tokens per turn", a.MaxTurns, a.MaxTokens)
	if a.TokenBudget > 0 {
		fmt.Fprintf(&b, ", %d tokens for the run", a.TokenBudget)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "- model turns: %d; tokens: %d input + %d output", a.Turns, a.InputTokens, a.OutputTokens)
	if ran > 0 {
		fmt.Fprintf(&b, " (%.0f per scenario)", float64(a.InputTokens+a.OutputTokens)/float64(ran))
	}
	b.WriteString("\n")
	if a.CostKnown {
		fmt.Fprintf(&b, "- estimated cost at list price: %s\n", usd(a.CostNanoUSD))
	} else {
		fmt.Fprintf(&b, "- estimated cost: unknown for model %s", a.Model)
		if a.EstimateModel != "" {
			fmt.Fprintf(&b, "; the same tokens at %s list price: %s", a.EstimateModel, usd(a.EstimateNanoUSD))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- agent errors (no report): %d\n", a.AgentErrors)
	fmt.Fprintf(&b, "- actions recorded by: %s (-via %s)", cmpOr(a.RecordedBy, agent.RecordedBy("")), cmpOr(a.Via, agent.ViaDirect))
	if a.Via != "" && a.Via != agent.ViaDirect {
		fmt.Fprintf(&b, "; the harness recorded none of the agent's; %d rows where no call recorded an action for the task "+
			"(read as outcome FAIL, policy PASS: nothing CommitLayer saw claims the task's effects)", a.NoAction)
	}
	b.WriteString("\n\n")
	b.WriteString(Markdown(res.Results))
	if len(a.Skipped) > 0 {
		b.WriteString("\n## catalogue.Skipped (they script one specific agent behaviour)\n\n| scenario | why |\n|---|---|\n")
		for _, s := range a.Skipped {
			fmt.Fprintf(&b, "| %s | %s |\n", s.ID, s.Reason)
		}
	}
	if len(a.NotRun) > 0 {
		b.WriteString("\n## Not run (token budget spent)\n\n")
		for _, id := range a.NotRun {
			fmt.Fprintf(&b, "- %s\n", id)
		}
	}
	b.WriteString("\n## Tokens per scenario\n\n| scenario | turns | calls | input | output | claim | agree | agent error |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Scenarios {
		l := matrix.RowLLM{}
		if r.LLM != nil {
			l = *r.LLM
		}
		agree := "yes"
		if !r.Agrees() {
			agree = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s |\n", r.ID, l.Turns, r.AgentCalls, l.InputTokens, l.OutputTokens,
			r.Claim, agree, strings.ReplaceAll(cmp.Or(l.AgentError, r.Error), "|", "\\|"))
	}
	return b.String()
}
