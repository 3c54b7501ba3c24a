package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
	"github.com/commitlayer/commitlayer/sandbox/sinks/sinkstest"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a getenv of the given variables only.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// defaults are the flags' defaults.
func defaults() Options {
	return Options{Concurrency: 2, Payments: stripepay.NameSandbox, Agent: "scripted", Via: agent.ViaDirect,
		MaxTurns: agent.DefaultMaxTurns, MaxTokens: agent.DefaultMaxTokens}
}

// TestCheckNamesTheAgentFlag: an agent flag out of range is refused
// naming that flag; the defaults and 0 (the default) pass.
func TestCheckNamesTheAgentFlag(t *testing.T) {
	ok := Options{Agent: agent.KindLLM, Provider: FakeProvider, MaxTurns: agent.DefaultMaxTurns, MaxTokens: agent.DefaultMaxTokens}
	require.NoError(t, ok.checkAgent())
	zero := ok
	zero.MaxTurns, zero.MaxTokens = 0, 0
	require.NoError(t, zero.checkAgent())
	for flag, o := range map[string]Options{
		"-max-turns":    {Agent: agent.KindLLM, Provider: agent.FakeOpenAI, MaxTurns: 101, MaxTokens: 1},
		"-max-tokens":   {Agent: agent.KindLLM, Provider: agent.FakeOpenAI, MaxTurns: 1, MaxTokens: -1},
		"-token-budget": {Agent: agent.KindLLM, Provider: agent.FakeOpenAI, MaxTurns: 1, MaxTokens: 1, TokenBudget: -5},
	} {
		require.ErrorContains(t, o.checkAgent(), flag+": must", flag)
	}
	// The registry's messages, the flag named; a provider that is not one
	// is not echoed (a key pasted there stays off the terminal and logs).
	err := Options{Agent: agent.KindLLM, Provider: "sk-ant-mistral"}.checkAgent()
	require.ErrorContains(t, err, "-provider: not a provider; use one of anthropic, openai, google, fake-anthropic, fake-openai, fake-google, or fake")
	require.NotContains(t, err.Error(), "sk-ant")
	require.ErrorContains(t, Options{Agent: agent.KindLLM}.checkAgent(), "-provider: not a provider")
	require.ErrorContains(t, Options{Agent: "robot"}.checkAgent(), "-agent: not an agent; use one of scripted, llm, replay")
	require.ErrorContains(t, Options{Agent: "scripted", Provider: agent.FakeOpenAI}.checkAgent(), "-provider: needs agent llm")
	require.ErrorContains(t, Options{Provider: agent.FakeOpenAI}.checkAgent(), "-provider: needs agent llm", "no -agent is the scripted one")
	require.ErrorContains(t, Options{Agent: "scripted", Model: "gpt-5"}.checkAgent(), "-model: needs agent llm")
	require.ErrorContains(t, Options{Agent: agent.KindLLM, Provider: FakeProvider, Model: "gpt-5"}.checkAgent(), "-provider fake runs each fake with its own model")
	require.ErrorContains(t, Options{Agent: "scripted", Via: agent.ViaMCP}.checkAgent(), "-via: needs agent llm")
	require.NoError(t, Options{Agent: "scripted", Via: agent.ViaDirect}.checkAgent())
	via := ok
	via.Via = "grpc"
	require.ErrorContains(t, via.checkAgent(), `-via: not a path; use one of direct, mcp, otlp`)
	for _, v := range agent.Vias {
		via.Via = v
		require.NoError(t, via.checkAgent(), v)
	}
	require.Len(t, ok.Fakes(), len(agent.FakeProviders), "-provider fake is one run per fake")
}

// -replay, -repeat and -judge are checked before anything starts; a
// judge's key is never printed.
func TestCheckReplayRepeatJudge(t *testing.T) {
	const key = "sk-ant-flagtest-must-not-be-printed"
	tests := []struct {
		name string
		key  string
		edit func(*Options)
		want string // "" means accepted
	}{
		{"replay a run id", "", func(o *Options) { o.Replay = "20261201-020000-abcdef" }, ""},
		{"replay a file", "", func(o *Options) { o.Replay, o.Concurrency = "sandbox/results/latest.json", 8 }, ""},
		{"repeat", "", func(o *Options) { o.Repeat, o.Only = 3, []string{"refund/"} }, ""},
		{"judge with its key", key, func(o *Options) { o.Judge = "anthropic" }, ""},
		{"judge with a model", key, func(o *Options) { o.Judge = "anthropic/claude-test" }, ""},
		{"repeat too many", "", func(o *Options) { o.Repeat = 11 }, "-repeat must be between 1 and 10"},
		{"negative repeat", "", func(o *Options) { o.Repeat = -1 }, "-repeat must be between"},
		{"unknown judge", "", func(o *Options) { o.Judge = "mistral" }, "not a provider"},
		{"judge without its key", "", func(o *Options) { o.Judge = "anthropic" }, "ANTHROPIC_API_KEY is not set"},
		{"replay with only", "", func(o *Options) { o.Replay, o.Only = "r1", []string{"refund/"} }, "do not apply"},
		{"replay with repeat", "", func(o *Options) { o.Replay, o.Repeat = "r1", 2 }, "do not apply"},
		{"replay with payments", "", func(o *Options) { o.Replay, o.Payments = "r1", "stripe-fake" }, "do not apply"},
		{"replay with a judge whose key is set", key, func(o *Options) { o.Replay, o.Judge = "r1", "anthropic" }, "do not apply"},
		{"replay with agent llm", "", func(o *Options) { o.Replay, o.Agent, o.Provider = "r1", "llm", "fake-openai" }, "-replay: a replay re-sends the recorded calls"},
		{"replay of a run id with a slash", "", func(o *Options) { o.Replay = "a b" }, "-replay: must be a benchmark run id"},
		{"agent replay without a run", "", func(o *Options) { o.Agent = "replay" }, "-replay: names the recorded run"},
		{"replay by agent and run", "", func(o *Options) { o.Agent, o.Replay = "replay", "r1" }, ""},
		{"no concurrency", "", func(o *Options) { o.Concurrency = 0 }, "-concurrency must be at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults()
			tc.edit(&o)
			err := o.Check(env(llm.KeyEnv[llm.Anthropic], tc.key), quietLog)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), key)
		})
	}
}

// TestCheckPayments: a bad backend, a non-refund scenario on Stripe, and
// stripe without a (test) key are refused before anything starts; the
// message names what was wrong and never shows the key.
func TestCheckPayments(t *testing.T) {
	const live = "sk_live_51ThisIsNotATestKeyAndMustNotBePrinted"
	tests := []struct {
		name, key, payments string
		only                []string
		want                string // "" means accepted
	}{
		{"default is the sandbox", "", stripepay.NameSandbox, nil, ""},
		{"stripe-fake needs no key", "", "stripe-fake", nil, ""},
		{"stripe-fake refund/ only", "", "stripe-fake", []string{"refund/"}, ""},
		{"stripe with a test key", "sk_test_abc123", "stripe", []string{"refund/"}, ""},
		{"unknown backend", "", "paypal", nil, "payments"},
		{"payout on stripe-fake", "", "stripe-fake", []string{"payout/"}, "runs only refund/ scenarios"},
		{"stripe without a key", "", "stripe", nil, stripepay.EnvKey + " is not set"},
		{"stripe with a live key", live, "stripe", nil, "test-mode secret key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults()
			o.Payments, o.Only = tc.payments, tc.only
			err := o.Check(env(stripepay.EnvKey, tc.key), quietLog)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), live)
		})
	}
}

// TestSinks: the sinks are built up front (a missing key refuses the run
// before it starts), and the end of a run logs every row to them as one
// experiment, printing what arrived; the key is never printed.
func TestSinks(t *testing.T) {
	o := defaults()
	o.SinkNames = "braintrust"
	require.ErrorContains(t, o.Check(env(), quietLog), sinks.EnvBraintrustKey)
	o.SinkNames = "nowhere"
	require.Error(t, o.Check(env(), quietLog))

	const key = "bt-test-key-sinksflag-0001"
	fake := sinkstest.NewBraintrust(key)
	defer fake.Close()
	o.SinkNames, o.Only = "braintrust", []string{"refund/baseline"}
	require.NoError(t, o.Check(env(sinks.EnvBraintrustKey, key, sinks.EnvBraintrustURL, fake.URL), quietLog))
	require.Len(t, o.sinks, 1)

	row := matrix.Row{ID: "refund/baseline", Process: "refund", Injection: "baseline", Family: "baseline",
		Truth:   matrix.Truth{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass, Knowable: true, OutcomeKnowable: true, PolicyKnowable: true},
		Verdict: matrix.Verdict{Status: commitlayer.StatusPass, Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass}},
		Agree:   matrix.Agree{Outcome: true, Policy: true},
		Judges:  []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "ok"}}}
	results := report.NewResults("abc", time.Unix(0, 0), time.Unix(5, 0), 1, []matrix.Row{row})
	var out bytes.Buffer
	deliverToSinks(context.Background(), o.sinks, "run-1", results, &out, quietLog)
	require.Contains(t, out.String(), "braintrust: 1/1 rows")
	require.Contains(t, out.String(), "all arrived")
	require.NotContains(t, out.String(), key)
	exps := fake.Experiments()
	require.Len(t, exps, 1)
	require.Len(t, exps[0].Events, 1)
}

func TestLooksLikeFile(t *testing.T) {
	require.True(t, looksLikeFile("sandbox/results/latest.json"))
	require.True(t, looksLikeFile("latest.json"))
	require.False(t, looksLikeFile("20261201-020000-abcdef"))
}
