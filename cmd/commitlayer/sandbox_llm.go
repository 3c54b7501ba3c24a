package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

// llmFake is the -provider that runs the fake of each of the three
// providers in turn, one run per SDK adapter.
const llmFake = "fake"

// llmOptions are the model-driven agent's flags of `commitlayer sandbox`.
type llmOptions struct {
	agent       string
	provider    string
	model       string
	maxTurns    int
	maxTokens   int
	tokenBudget int64
	// via is who records the agent's actions (agent.Vias).
	via string
}

func (o *llmOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.agent, "agent", bench.AgentScripted, "the agent: scripted, llm (a model drives the same tools; needs -provider) or replay (the calls of the run -replay names re-sent)")
	fs.StringVar(&o.provider, "provider", "", "the model provider of -agent llm: anthropic, openai, google (key in ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY), "+
		"fake-anthropic, fake-openai, fake-google (an in-process fake of that provider's API, spoken to through its SDK), "+
		"or fake (the three fakes in turn); results in llm_<provider>.{json,md}")
	fs.StringVar(&o.model, "model", "", "the model of -agent llm (default: the provider's default model)")
	fs.IntVar(&o.maxTurns, "max-turns", agent.DefaultMaxTurns, "model turns per scenario")
	fs.IntVar(&o.maxTokens, "max-tokens", agent.DefaultMaxTokens, "output tokens per model turn")
	fs.StringVar(&o.via, "via", agent.ViaDirect, "who records the -agent llm agent's actions: direct (the harness), mcp (its tool calls go through CommitLayer's MCP gateway, which records them) "+
		"or otlp (its tool calls are exported as OpenTelemetry spans to the API's /v1/traces); results in llm_<provider>_via-<path>.{json,md}")
	fs.Int64Var(&o.tokenBudget, "token-budget", 0, "tokens (input plus output) the run may use; once spent, the scenarios left are listed as not run (0: no limit)")
}

// check refuses an unknown agent or provider, or a bound out of range,
// before anything starts: the registry of agent kinds checks the flags as
// it checks the admin route's fields (bench.CheckAgent), and the flag is
// named. -provider fake (the three fakes in turn) is this command's: it is
// checked as each fake (they take the same bounds).
func (o *llmOptions) check() error {
	req := o.agentRequest()
	if req.Provider == llmFake {
		if o.model != "" {
			return fmt.Errorf("-provider fake runs each fake with its own model; leave -model out")
		}
		req.Provider = agent.FakeAnthropic
	}
	_, err := bench.CheckAgent(&req)
	var fe *commitlayer.FieldError
	if errors.As(err, &fe) && fe.Field == "provider" && req.Agent == bench.AgentLLM {
		return fmt.Errorf("%w, or fake (the three fakes in turn)", flagError(err))
	}
	return flagError(err)
}

// agentRequest is the request's agent fields as the flags give them; the
// bounds, whose flags have defaults, only for a model-driven agent. No
// -agent is the scripted agent (a provider does not imply llm here).
func (o *llmOptions) agentRequest() bench.Request {
	req := bench.Request{Agent: cmp.Or(o.agent, bench.AgentScripted), Provider: o.provider, Model: o.model, Via: o.via}
	if req.Agent == bench.AgentLLM {
		req.MaxTurns, req.MaxTokens, req.TokenBudget = o.maxTurns, o.maxTokens, o.tokenBudget
	}
	return req
}

// flagError names the flag of a request's field error: -max-turns for
// max_turns, -replay for replay_of.
func flagError(err error) error {
	var fe *commitlayer.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	flag := strings.ReplaceAll(fe.Field, "_", "-")
	if fe.Field == "replay_of" {
		flag = "replay"
	}
	return fmt.Errorf("-%s: %s", flag, fe.Reason)
}

// request adds the agent's fields to a run's request.
func (o *llmOptions) request(req bench.Request) bench.Request {
	if o.agent != bench.AgentLLM {
		return req
	}
	req.Agent, req.Provider, req.Model = bench.AgentLLM, o.provider, o.model
	req.MaxTurns, req.MaxTokens, req.TokenBudget = o.maxTurns, o.maxTokens, o.tokenBudget
	req.Via = o.via
	return req
}

// runFakes runs the matrix with the fake of each provider in turn: every
// SDK adapter end to end. The exit status is the worst run's.
func runFakes(ctx context.Context, logger *slog.Logger, o sandboxOptions, stdout, stderr io.Writer) int {
	rc := 0
	for _, p := range agent.FakeProviders {
		one := o
		one.llm.provider = p
		fmt.Fprintf(stdout, "== -provider %s\n", p)
		rc = max(rc, runMatrix(ctx, logger, one, stdout, stderr))
	}
	return rc
}

// writeLLMResults writes a model-driven run's llm_<provider>.{json,md}.
func writeLLMResults(dir string, results matrix.Results, started bench.Started, res bench.BenchmarkResult, stdout io.Writer) error {
	lr := report.NewLLMResults(results, *started.Agent, started.Skipped, res.NotRun)
	if err := report.WriteLLMFiles(dir, lr); err != nil {
		return err
	}
	base := report.LLMViaFileBase(started.Agent.Provider, started.Agent.Via)
	a := lr.Agent
	fmt.Fprintf(stdout, "results: %s/%s.json, %s/%s.md\n", dir, base, dir, base)
	fmt.Fprintf(stdout, "model-driven agent %s (%s): %d applicable, %d skipped, %d not run; %d turns, %d+%d tokens, %d agent errors\n",
		a.Provider, a.Model, a.Applicable, len(a.Skipped), len(a.NotRun), a.Turns, a.InputTokens, a.OutputTokens, a.AgentErrors)
	return nil
}
