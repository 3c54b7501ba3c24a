package bench

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
)

// Every request goes to one registered kind, which checks its fields: a
// bad one is a field error naming the request's field, a value that may be
// a pasted key is not echoed, and a good one comes out normalized.
func TestCheckAgent(t *testing.T) {
	require.Equal(t, []string{"scripted", "llm", "replay"}, AgentKinds())
	for _, name := range AgentKinds() {
		k, ok := LookupAgentKind(name)
		require.True(t, ok, name)
		require.Equal(t, name, k.Name())
	}
	_, ok := LookupAgentKind("robot")
	require.False(t, ok)

	for _, tc := range []struct {
		name string
		req  Request
		kind string
		want Request
	}{
		{"nothing is the scripted agent", Request{}, AgentScripted, Request{}},
		{"scripted by name, via direct", Request{Agent: "scripted", Via: agent.ViaDirect}, AgentScripted, Request{}},
		{"a provider implies llm", Request{Provider: agent.FakeGoogle, MaxTurns: 12}, AgentLLM,
			Request{Agent: "llm", Provider: agent.FakeGoogle, MaxTurns: 12}},
		{"llm via mcp", Request{Agent: "llm", Provider: "openai", Via: agent.ViaMCP}, AgentLLM,
			Request{Agent: "llm", Provider: "openai", Via: agent.ViaMCP}},
		{"replay_of is a replay", Request{ReplayOf: "r1", Concurrency: 8}, AgentReplay, Request{ReplayOf: "r1", Concurrency: 8}},
		{"replay by name", Request{Agent: "replay", ReplayOf: "r1"}, AgentReplay, Request{ReplayOf: "r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			k, err := CheckAgent(&req)
			require.NoError(t, err)
			require.Equal(t, tc.kind, k.Name())
			require.Equal(t, tc.want, req)
		})
	}

	for _, tc := range []struct {
		name  string
		req   Request
		field string
	}{
		{"unknown agent", Request{Agent: "robot", Provider: "openai"}, "agent"},
		{"unknown provider", Request{Agent: "llm", Provider: "mistral"}, "provider"},
		{"a key is not a provider", Request{Provider: "sk-ant-api03-abc"}, "provider"},
		{"a key is not an agent", Request{Agent: "sk-ant-api03-abc"}, "agent"},
		{"llm without provider", Request{Agent: "llm"}, "provider"},
		{"fake alone is the CLI's", Request{Agent: "llm", Provider: "fake"}, "provider"},
		{"scripted with a provider", Request{Agent: "scripted", Provider: "openai"}, "provider"},
		{"model without provider", Request{Model: "gpt-5"}, "model"},
		{"turns without provider", Request{MaxTurns: 3}, "max_turns"},
		{"scripted via mcp", Request{Via: agent.ViaMCP}, "via"},
		{"no such path", Request{Via: "grpc"}, "via"},
		{"llm on no such path", Request{Provider: "openai", Via: "grpc"}, "via"},
		{"too many turns", Request{Provider: "openai", MaxTurns: 1000}, "max_turns"},
		{"too many tokens", Request{Provider: "openai", MaxTokens: 32001}, "max_tokens"},
		{"negative budget", Request{Provider: "openai", TokenBudget: -1}, "token_budget"},
		{"a model name with a newline", Request{Provider: "openai", Model: "gpt\n5"}, "model"},
		{"replay of a path", Request{ReplayOf: "a/b"}, "replay_of"},
		{"replay by name of nothing", Request{Agent: "replay"}, "replay_of"},
		{"replay with only", Request{ReplayOf: "r1", Only: []string{"refund/"}}, "replay_of"},
		{"replay with a judge", Request{ReplayOf: "r1", Judge: "openai"}, "replay_of"},
		{"replay with a provider", Request{ReplayOf: "r1", Agent: "llm", Provider: agent.FakeOpenAI}, "replay_of"},
		{"replay with turns", Request{ReplayOf: "r1", MaxTurns: 5}, "replay_of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			_, err := CheckAgent(&req)
			var fe *commitlayer.FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, tc.field, fe.Field, fe.Reason)
			require.NotContains(t, fe.Reason, "sk-ant", "a value pasted as the agent or provider is not echoed")
			require.NotContains(t, fe.Reason, "mistral")
		})
	}
}

// The Scenario workflow picks the kind from its input as recorded
// histories carry it: a replay first, then a spec, else the scripted
// agent.
func TestScenarioAgentKind(t *testing.T) {
	spec := &agent.Spec{Kind: agent.KindLLM, Provider: agent.FakeOpenAI}
	require.Equal(t, AgentScripted, scenarioAgentKind(ScenarioInput{}).Name())
	require.Equal(t, AgentLLM, scenarioAgentKind(ScenarioInput{Agent: spec}).Name())
	require.Equal(t, AgentReplay, scenarioAgentKind(ScenarioInput{ReplayOf: "r1"}).Name())
	require.Equal(t, AgentReplay, scenarioAgentKind(ScenarioInput{ReplayOf: "r1", Agent: spec}).Name())
	require.True(t, scenarioAgentKind(ScenarioInput{}).judged())
	require.True(t, scenarioAgentKind(ScenarioInput{Agent: spec}).judged())
	require.False(t, scenarioAgentKind(ScenarioInput{ReplayOf: "r1"}).judged(), "a replay carries the recorded judges' verdicts over")
}
