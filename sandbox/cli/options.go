package cli

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// Options are a matrix run's, as the flags of `commitlayer sandbox` and
// `demo` give them.
type Options struct {
	Only        []string
	Concurrency int
	// Out is the directory for the results files and the check bundle
	// ("": don't write).
	Out      string
	Serve    bool // also serve the API while the run goes
	Purge    bool // delete the run's tenants at the end
	Payments string
	// SinkNames are the experiment platforms the rows are logged to;
	// Check builds them (a missing key fails before anything starts).
	SinkNames string
	sinks     []sinks.Sink
	// The agent: scripted, llm (a provider drives the same tools) or
	// replay; the model-driven agent's bounds and path.
	Agent, Provider, Model string
	MaxTurns, MaxTokens    int
	TokenBudget            int64
	Via                    string
	// Replay names a recorded run (an id or a results file); Repeat runs
	// each scenario that many times (pass^k); Judge adds the model judge.
	Replay string
	Repeat int
	Judge  string
}

// AddOnly adds the scenario ids or prefixes of a comma-separated list to
// Only (the -only flag, which may be repeated).
func (o *Options) AddOnly(list string) error {
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.Only = append(o.Only, p)
		}
	}
	return nil
}

// FakeProvider is the -provider that runs the fake of each of the three
// providers in turn, one run per SDK adapter (Fakes).
const FakeProvider = "fake"

// Fakes are the runs -provider fake stands for, one per fake provider;
// o itself otherwise.
func (o Options) Fakes() []Options {
	if o.Provider != FakeProvider {
		return []Options{o}
	}
	var out []Options
	for _, p := range agent.FakeProviders {
		one := o
		one.Provider = p
		out = append(out, one)
	}
	return out
}

// Via reports whether a run records through the process's API (a
// model-driven agent behind the MCP gateway or the trace ingest): the API
// is then served.
func (o Options) ViaAPI() bool {
	return o.Agent == agent.KindLLM && o.Via != "" && o.Via != agent.ViaDirect
}

// Check refuses what cannot run before anything starts, naming the flag:
// a repeat out of range, an unknown judge or one without its key, a replay
// combined with what it does not take, an unknown agent or provider or a
// bound out of range (through the registry of agent kinds, as the admin
// route checks its fields), a payments backend that cannot run the
// scenarios or lacks its key, a sink without its key. Keys are read with
// getenv, never echoed.
func (o *Options) Check(getenv func(string) string, logger *slog.Logger) error {
	if o.Concurrency < 1 {
		return errors.New("-concurrency must be at least 1")
	}
	if o.Repeat < 0 || o.Repeat > bench.MaxRepeat {
		return fmt.Errorf("-repeat must be between 1 and %d", bench.MaxRepeat)
	}
	if o.Judge != "" {
		provider, _, err := harness.ParseJudge(o.Judge)
		if err != nil {
			return fmt.Errorf("-judge: %w", err)
		}
		if getenv(llm.KeyEnv[provider]) == "" {
			return fmt.Errorf("-judge %s: %s is not set", o.Judge, llm.KeyEnv[provider])
		}
	}
	if o.SinkNames != "" {
		names, err := sinks.ParseNames(o.SinkNames)
		if err == nil {
			o.sinks, err = sinks.FromEnv(names, getenv, logger)
		}
		if err != nil {
			return fmt.Errorf("-sinks: %w", err)
		}
	}
	if o.Replay != "" {
		return o.checkReplay()
	}
	if err := o.checkAgent(); err != nil {
		return err
	}
	if _, _, err := bench.SelectScenarios(o.Payments, o.Only); err != nil {
		return err
	}
	if o.Payments == stripepay.NameStripe {
		if _, err := stripepay.ConfigFromEnv(getenv); err != nil {
			return fmt.Errorf("-payments stripe: %w (or use -payments stripe-fake for the in-process fake Stripe)", err)
		}
	}
	return nil
}

// checkAgent refuses an unknown agent or provider, or a bound out of
// range: the registry of agent kinds checks the flags as it checks the
// admin route's fields (bench.CheckAgent). -provider fake (the three fakes
// in turn) is checked as each fake (they take the same bounds).
func (o Options) checkAgent() error {
	req := o.agentRequest()
	if req.Provider == FakeProvider {
		if o.Model != "" {
			return errors.New("-provider fake runs each fake with its own model; leave -model out")
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

// checkReplay refuses what a replay does not take, as the admin route
// does; -agent scripted is the flag's default.
func (o Options) checkReplay() error {
	req := o.agentRequest()
	if req.Agent == bench.AgentScripted {
		req.Agent = ""
	}
	req.ReplayOf, req.Only, req.Repeat, req.Judge = o.Replay, o.Only, o.Repeat, o.Judge
	if looksLikeFile(o.Replay) {
		req.ReplayOf = "imported" // the file is imported as a run first, named by its id (replayRequest)
	}
	if o.Payments != stripepay.NameSandbox {
		req.Payments = o.Payments
	}
	_, err := bench.CheckAgent(&req)
	return flagError(err)
}

// agentRequest is the request's agent fields as the flags give them; the
// bounds, whose flags have defaults, only for a model-driven agent. No
// -agent is the scripted agent (a provider does not imply llm here).
func (o Options) agentRequest() bench.Request {
	req := bench.Request{Agent: cmp.Or(o.Agent, bench.AgentScripted), Provider: o.Provider, Model: o.Model, Via: o.Via}
	if req.Agent == bench.AgentLLM {
		req.MaxTurns, req.MaxTokens, req.TokenBudget = o.MaxTurns, o.MaxTokens, o.TokenBudget
	}
	return req
}

// request is the run's request (a replay's is made by replayRequest).
func (o Options) request() bench.Request {
	req := bench.Request{Only: o.Only, Concurrency: o.Concurrency, Payments: o.Payments, Repeat: o.Repeat, Judge: o.Judge}
	if o.Agent == bench.AgentLLM {
		req.Agent, req.Provider, req.Model = bench.AgentLLM, o.Provider, o.Model
		req.MaxTurns, req.MaxTokens, req.TokenBudget = o.MaxTurns, o.MaxTokens, o.TokenBudget
		req.Via = o.Via
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

// looksLikeFile tells a results file from a run id: a path with a slash or
// a .json name, or a file that exists.
func looksLikeFile(s string) bool {
	if strings.Contains(s, "/") || strings.HasSuffix(s, ".json") {
		return true
	}
	_, err := os.Stat(s)
	return err == nil
}
