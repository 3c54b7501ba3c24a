package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// A run's model-driven agent: which provider and model, its bounds, and
// which path records its actions. The kinds of agent a run may name (the
// scripted one, this one, a replay of a recorded run) are sandbox/bench's
// registry (bench.AgentKinds); this is what the model-driven kind carries
// into the workflows.

// KindLLM is the kind of a model-driven agent (Spec.Kind, a request's
// "agent").
const KindLLM = "llm"

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

// Providers lists the provider names a model-driven run accepts (the
// command line's -provider, the admin route's "provider"): llm.Providers,
// then their fakes. It is derived, never written out, so a provider added
// to llm is accepted everywhere.
var Providers = append(slices.Clone(llm.Providers), FakeProviders...)

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

// Paths a model-driven agent's actions are recorded by (sandbox/harness,
// via_run.go).
const (
	ViaDirect = "direct" // the harness records the action (Spec.Via "")
	ViaMCP    = "mcp"    // CommitLayer's MCP gateway, from the tool calls
	ViaOTLP   = "otlp"   // CommitLayer's trace ingest, from the exported spans
)

// Vias lists the paths -via takes.
var Vias = []string{ViaDirect, ViaMCP, ViaOTLP}

// RecordedBy says in words who recorded a run's actions.
func RecordedBy(via string) string {
	switch via {
	case ViaMCP:
		return "CommitLayer's MCP gateway (mcpgw), from the agent's tool calls through it, with the sandbox contracts' bindings"
	case ViaOTLP:
		return "CommitLayer's trace ingest (POST /v1/traces), from the agent's tool calls exported as OpenTelemetry spans, with the sandbox contracts' bindings"
	}
	return "the harness (direct: the agent's report recorded as the action)"
}

// CheckVia refuses a path that is not one of Vias ("" is direct), without
// echoing it.
func CheckVia(via string) error {
	if via != "" && !slices.Contains(Vias, via) {
		return &commitlayer.FieldError{Field: "via", Reason: "not a path; use one of " + strings.Join(Vias, ", ")}
	}
	return nil
}

// Spec is a run's model-driven agent: names and bounds only, never a key
// (each worker reads its provider's key from its own environment).
type Spec struct {
	Kind     string `json:"kind"` // KindLLM
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
	// ViaOTLP.
	Via string `json:"via,omitempty"`
}

// Normalize checks the spec and fills in its defaults. Its errors are
// *commitlayer.FieldError naming the request field; a value that is not
// one is never echoed (a key pasted in the wrong field stays out of
// answers and logs).
func (s Spec) Normalize() (Spec, error) {
	if s.Kind == "" {
		s.Kind = KindLLM
	}
	if s.Kind != KindLLM {
		return s, &commitlayer.FieldError{Field: "agent", Reason: fmt.Sprintf("not a model-driven agent; use %q", KindLLM)}
	}
	if !slices.Contains(Providers, s.Provider) {
		return s, &commitlayer.FieldError{Field: "provider", Reason: "not a provider; use one of " + strings.Join(Providers, ", ")}
	}
	switch {
	case len(s.Model) > 100 || strings.ContainsAny(s.Model, "\x00\n\r"):
		return s, &commitlayer.FieldError{Field: "model", Reason: "must be a model name of at most 100 characters"}
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
	if err := CheckVia(s.Via); err != nil {
		return s, err
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
func (s Spec) Fake() bool { return strings.HasPrefix(s.Provider, FakePrefix) }
