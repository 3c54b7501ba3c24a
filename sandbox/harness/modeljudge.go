package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/judge"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// ModelJudgeInput asks the model judge about one row's trajectory. Judge
// is "provider" or "provider/model"; the key is never here: the worker
// reads it from its own environment.
type ModelJudgeInput struct {
	Judge      string
	Trajectory llm.Trajectory
}

// ParseJudge checks a model judge's name: a provider of the llm package,
// optionally followed by "/model".
func ParseJudge(name string) (provider, model string, err error) {
	provider, model, _ = strings.Cut(strings.TrimSpace(name), "/")
	if !slices.Contains(llm.Providers, provider) {
		return "", "", fmt.Errorf("judge %q: not a provider; use one of %s (optionally provider/model)", name, strings.Join(llm.Providers, ", "))
	}
	if strings.ContainsAny(model, " \t\n\x00") || len(model) > 100 {
		return "", "", fmt.Errorf("judge %q: the model name is malformed", name)
	}
	return provider, model, nil
}

// JudgeProviders builds the model judge's provider from a parsed name;
// llm.FromEnv (the key from this process's environment) when nil.
type JudgeProviders func(provider, model string) (llm.Provider, error)

// ModelJudge asks the model judge (llm/judge.Model: the provider's
// structured output, temperature 0) for a verdict on the trajectory. An
// answer that does not parse is UNKNOWN; a provider that is misconfigured
// (no key) fails for good, a retryable provider error is retried by
// Temporal.
func (a *Activities) ModelJudge(ctx context.Context, in ModelJudgeInput) (matrix.JudgeVerdict, error) {
	provider, model, err := ParseJudge(in.Judge)
	if err != nil {
		return matrix.JudgeVerdict{}, invalidInput(err.Error(), nil)
	}
	build := a.JudgeProviders
	if build == nil {
		build = llm.FromEnv
	}
	p, err := build(provider, model)
	if err != nil {
		return matrix.JudgeVerdict{}, invalidInput("judge: "+err.Error(), nil)
	}
	r, err := judge.Model{Provider: p}.Judge(ctx, in.Trajectory)
	if err != nil {
		if e, ok := llm.AsError(err); ok && !e.Retryable() {
			return matrix.JudgeVerdict{}, temporal.NewNonRetryableApplicationError(err.Error(), "JudgeFailed", nil)
		}
		return matrix.JudgeVerdict{}, err
	}
	return matrix.JudgeVerdict{Name: r.Judge, Verdict: r.Verdict, Reason: r.Reason}, nil
}
