package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// The model-driven agent in the failure matrix. The Scenario workflow (in
// sandbox/bench) holds the conversation (llm/loop) and calls these
// activities: StartAgent once (the task in words, the tools, the agent's
// chaos armed), ModelTurn for each model turn (on any worker: the provider
// is built in that process, its key read from that process's environment),
// AgentToolCall for each tool call (on the scenario's own worker, through
// its chaos), FinishAgent once (the report becomes the action's claim and
// the action is recorded). ModelTurn and AgentToolCall write ahead
// (AgentSteps): a retried activity answers the recorded result, so a
// worker that stops in the middle never makes a turn billed twice or a
// tool call made twice.

// AgentLLM is the agent kind of a run with a model-driven agent ("" is the
// scripted agent).
const AgentLLM = "llm"

// Provider names of a model-driven run: the three real providers, and a
// fake of each (llm/fake, in this process, driven by the sandbox's plan)
// through the same SDK adapter.
const (
	FakePrefix    = "fake-"
	FakeAnthropic = FakePrefix + llm.Anthropic
	FakeOpenAI    = FakePrefix + llm.OpenAI
	FakeGoogle    = FakePrefix + llm.Google
)

// FakeProviders are the fakes, one per provider of llm.Providers (one per
// SDK adapter).
var FakeProviders = fakesOf(llm.Providers)

// AgentProviders lists the provider names a model-driven run accepts (the
// command line's -provider, the admin route's "provider"): llm.Providers,
// then their fakes. It is derived, never written out, so a provider added
// to llm is accepted everywhere.
var AgentProviders = append(slices.Clone(llm.Providers), FakeProviders...)

func fakesOf(providers []string) []string {
	out := make([]string, len(providers))
	for i, p := range providers {
		out[i] = FakePrefix + p
	}
	return out
}

// Bounds of a model-driven scenario when the run names none.
const (
	DefaultMaxTurns  = 20
	DefaultMaxTokens = 1024
)

// AgentSpec is a run's model-driven agent: names and bounds only, never a
// key (each worker reads its provider's key from its own environment).
type AgentSpec struct {
	Kind     string `json:"kind"` // AgentLLM
	Provider string `json:"provider"`
	// Model is the model every turn asks for ("" is the provider's
	// default, llm.DefaultModels; "fake-<provider>" for a fake).
	Model string `json:"model,omitempty"`
	// MaxTurns bounds each scenario's model turns; MaxTokens each turn's
	// output.
	MaxTurns  int `json:"max_turns,omitempty"`
	MaxTokens int `json:"max_tokens,omitempty"`
	// TokenBudget bounds the run's tokens (input plus output; 0: none).
	// Once spent, no scenario starts and a running one stops at its next
	// turn; the scenarios not started are listed as not run.
	TokenBudget int64 `json:"token_budget,omitempty"`
	// Via is how the agent's calls reach the tools and who records its
	// actions: "" (direct: the harness records the action), ViaMCP or
	// ViaOTLP (via_run.go).
	Via string `json:"via,omitempty"`
}

// Normalize checks the spec and fills in its defaults.
func (s AgentSpec) Normalize() (AgentSpec, error) {
	if s.Kind == "" {
		s.Kind = AgentLLM
	}
	if s.Kind != AgentLLM {
		return s, &commitlayer.FieldError{Field: "agent", Reason: fmt.Sprintf("%q is not an agent; use %q (or leave it out for the scripted agent)", s.Kind, AgentLLM)}
	}
	if !slices.Contains(AgentProviders, s.Provider) {
		return s, &commitlayer.FieldError{Field: "provider", Reason: fmt.Sprintf("%q is not a provider; use one of %s", s.Provider, strings.Join(AgentProviders, ", "))}
	}
	switch {
	case s.MaxTurns < 0 || s.MaxTurns > 100:
		return s, &commitlayer.FieldError{Field: "max_turns", Reason: "must be between 0 (the default) and 100"}
	case s.MaxTokens < 0 || s.MaxTokens > 32000:
		return s, &commitlayer.FieldError{Field: "max_tokens", Reason: "must be between 0 (the default) and 32000"}
	case s.TokenBudget < 0:
		return s, &commitlayer.FieldError{Field: "token_budget", Reason: "must not be negative"}
	}
	if s.Via == ViaDirect {
		s.Via = ""
	}
	if s.Via != "" && !slices.Contains(Vias, s.Via) {
		return s, &commitlayer.FieldError{Field: "via", Reason: fmt.Sprintf("%q is not a path; use one of %s", s.Via, strings.Join(Vias, ", "))}
	}
	if s.MaxTurns == 0 {
		s.MaxTurns = DefaultMaxTurns
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = DefaultMaxTokens
	}
	if s.Model == "" {
		if wire, ok := strings.CutPrefix(s.Provider, FakePrefix); ok {
			s.Model = "fake-" + wire
		} else {
			s.Model = llm.DefaultModels[s.Provider]
		}
	}
	return s, nil
}

// Fake reports whether the spec's provider is a fake.
func (s AgentSpec) Fake() bool { return strings.HasPrefix(s.Provider, FakePrefix) }

// SkipForModel says why a scenario does not apply to a model-driven agent:
// it scripts one specific agent behaviour (making no call, acting on
// another record, sending other values than the task's) that a model
// decides for itself. "" means it applies.
func SkipForModel(sc Scenario) string {
	p := sc.Profile
	switch {
	case p.NoCalls:
		return "scripts an agent that makes no call and reports success"
	case p.WrongSubject != "":
		return "scripts an agent that acts on another record (" + p.WrongSubject + ") than it reports"
	case len(p.OverrideParams) > 0:
		keys := make([]string, 0, len(p.OverrideParams))
		for k := range p.OverrideParams {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return "scripts an agent that sends other values than the task's (" + strings.Join(keys, ", ") + ")"
	}
	return ""
}

// Skipped is a scenario a model-driven run leaves out, and why.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// SplitForModel splits scenarios into those a model-driven agent runs and
// those it skips.
func SplitForModel(scenarios []Scenario) (run []Scenario, skipped []Skipped) {
	for _, sc := range scenarios {
		if r := SkipForModel(sc); r != "" {
			skipped = append(skipped, Skipped{ID: sc.ID, Reason: r})
			continue
		}
		run = append(run, sc)
	}
	return run, skipped
}
