package benchapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
)

// Bounds of a request.
const (
	// maxConcurrency bounds the concurrency a run may ask for.
	maxConcurrency = bench.MaxConcurrency
	// maxRepeat bounds the repeat a run may ask for (pass^k).
	maxRepeat = 10
)

// checkRequest checks a request's shape (400, naming the field); what it
// names (a scenario, a backend, a recorded run, a sink) is the runner's to
// check (422). It settles the agent: a provider implies "llm".
func checkRequest(req *bench.Request) error {
	if req.Concurrency < 0 || req.Concurrency > maxConcurrency {
		return invalid("concurrency: must be between 0 (default) and %d", maxConcurrency)
	}
	for i, o := range req.Only {
		if strings.TrimSpace(o) == "" || len(o) > 200 || strings.IndexByte(o, 0) >= 0 {
			return invalid("only[%d]: must be a scenario id or prefix", i)
		}
	}
	if len(req.Payments) > 50 || strings.IndexByte(req.Payments, 0) >= 0 {
		// The runner checks the name against the backends it knows (422).
		return invalid("payments: must be a payments backend name")
	}
	if err := checkAgent(req); err != nil {
		return err
	}
	return checkExtras(*req)
}

func invalid(format string, args ...any) error {
	return api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, format, args...)
}

// checkAgent checks a run's agent fields: an unknown agent or provider, a
// provider without agent llm's, or bounds out of range is 400.
func checkAgent(req *bench.Request) error {
	if req.Via != "" && !slices.Contains(agent.Vias, req.Via) {
		return invalid("via: must be one of %s", strings.Join(agent.Vias, ", "))
	}
	switch req.Agent {
	case "", "scripted":
		if req.Provider == "" {
			if req.Model != "" || req.MaxTurns != 0 || req.MaxTokens != 0 || req.TokenBudget != 0 ||
				req.Via != "" && req.Via != agent.ViaDirect {
				return invalid("model, max_turns, max_tokens, token_budget and via need agent llm and a provider")
			}
			req.Agent = ""
			return nil
		}
		if req.Agent == "scripted" {
			return invalid("provider: the scripted agent takes no provider")
		}
		req.Agent = "llm"
	case "llm":
	default:
		return invalid("agent: must be scripted or llm")
	}
	if !slices.Contains(agent.Providers, req.Provider) {
		// The value is not echoed: a key pasted in the wrong field stays out
		// of the answer and the logs.
		return invalid("provider: not a provider; use one of %s", strings.Join(agent.Providers, ", "))
	}
	switch {
	case len(req.Model) > 100 || strings.ContainsAny(req.Model, "\x00\n\r"):
		return invalid("model: must be a model name of at most 100 characters")
	case req.MaxTurns < 0 || req.MaxTurns > 100:
		return invalid("max_turns: must be between 0 (default) and 100")
	case req.MaxTokens < 0 || req.MaxTokens > 32000:
		return invalid("max_tokens: must be between 0 (default) and 32000")
	case req.TokenBudget < 0:
		return invalid("token_budget: must not be negative")
	}
	return nil
}

// checkExtras checks the shape of replay_of, repeat, judge and sinks.
func checkExtras(req bench.Request) error {
	if req.Repeat < 0 || req.Repeat > maxRepeat {
		return invalid("repeat: must be between 0 (once) and %d", maxRepeat)
	}
	if len(req.ReplayOf) > 100 || strings.IndexByte(req.ReplayOf, 0) >= 0 || strings.ContainsAny(req.ReplayOf, " /") {
		return invalid("replay_of: must be a benchmark run id")
	}
	if len(req.Judge) > 150 || strings.IndexByte(req.Judge, 0) >= 0 {
		return invalid("judge: must be a provider name, optionally provider/model")
	}
	if len(req.Sinks) > 5 {
		return invalid("sinks: at most 5 names")
	}
	for i, s := range req.Sinks {
		if s == "" || len(s) > 30 || strings.IndexByte(s, 0) >= 0 || strings.Contains(s, ",") {
			return invalid("sinks[%d]: must be a sink name", i)
		}
	}
	if req.ReplayOf != "" && (len(req.Only) > 0 || req.Payments != "" || req.Repeat > 1 || req.Judge != "") {
		return invalid("replay_of: a replay re-runs the recorded run's scenarios on its payments backend and carries its judges' verdicts over; only, payments, repeat and judge do not apply")
	}
	if req.ReplayOf != "" && (req.Agent != "" || req.Provider != "") {
		return invalid("replay_of: a replay re-sends the recorded calls and asks no model; agent and provider do not apply (a recorded model-driven run replays as it is)")
	}
	return nil
}
