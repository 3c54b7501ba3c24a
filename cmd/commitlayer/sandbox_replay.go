package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// replayFlags adds -replay, -repeat and -judge.
func replayFlags(fs *flag.FlagSet, o *sandboxOptions) {
	fs.StringVar(&o.replay, "replay", "", "replay a recorded run instead (a run id, or a results file such as sandbox/results/latest.json): its tool calls re-executed on fresh enterprises under the same chaos, verified on this engine, no model called; writes replay.{json,md,html}")
	fs.IntVar(&o.repeat, "repeat", 0, fmt.Sprintf("run each scenario this many times, each on a fresh enterprise, and report pass^k (at most %d)", bench.MaxRepeat))
	fs.StringVar(&o.judge, "judge", "", "add the model judge: a provider (anthropic, openai, google) or provider/model; its key is read from this process's environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY)")
}

// checkReplayFlags refuses what cannot run before anything starts: a
// repeat out of range, an unknown judge or one without its key, a replay
// combined with what it does not take.
func checkReplayFlags(name string, o *sandboxOptions, stderr io.Writer) error {
	fail := func(err error) error {
		fmt.Fprintf(stderr, "commitlayer %s: %v\n", name, err)
		return err
	}
	if o.repeat < 0 || o.repeat > bench.MaxRepeat {
		return fail(fmt.Errorf("-repeat must be between 1 and %d", bench.MaxRepeat))
	}
	if o.judge != "" {
		provider, _, err := harness.ParseJudge(o.judge)
		if err != nil {
			return fail(fmt.Errorf("-judge: %w", err))
		}
		if os.Getenv(llm.KeyEnv[provider]) == "" {
			return fail(fmt.Errorf("-judge %s: %s is not set", o.judge, llm.KeyEnv[provider]))
		}
	}
	if o.replay == "" {
		return nil
	}
	// The replay kind checks what a replay does not take, as it does on
	// the admin route; -agent scripted is the flag's default.
	req := o.llm.agentRequest()
	if req.Agent == bench.AgentScripted {
		req.Agent = ""
	}
	req.ReplayOf, req.Only, req.Repeat, req.Judge = o.replay, o.only, o.repeat, o.judge
	if looksLikeFile(o.replay) {
		req.ReplayOf = "imported" // the file is imported as a run first, named by its id (replayRequest)
	}
	if o.payments != stripepay.NameSandbox {
		req.Payments = o.payments
	}
	if _, err := bench.CheckAgent(&req); err != nil {
		return fail(flagError(err))
	}
	return nil
}

// replayRequest is the request replaying o.replay: a run id as it is, or a
// results file imported as a stored run first.
func replayRequest(ctx context.Context, r *bench.Runner, o sandboxOptions, stdout io.Writer) (bench.Request, error) {
	req := bench.Request{Concurrency: o.concurrency, ReplayOf: o.replay}
	if !looksLikeFile(o.replay) {
		return req, nil
	}
	b, err := os.ReadFile(o.replay)
	if err != nil {
		return req, fmt.Errorf("read %s: %w", o.replay, err)
	}
	var res matrix.Results
	if err := json.Unmarshal(b, &res); err != nil {
		return req, fmt.Errorf("read %s: %w", o.replay, err)
	}
	run, err := r.ImportResults(ctx, o.replay, res)
	if err != nil {
		return req, err
	}
	fmt.Fprintf(stdout, "imported %s (commit %s, %d scenarios) as run %s\n", o.replay, res.Commit, len(res.Scenarios), run.ID)
	req.ReplayOf = run.ID
	return req, nil
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
