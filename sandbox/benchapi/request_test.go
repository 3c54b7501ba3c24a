package benchapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/bench"
)

func TestAdminBenchmarkAgent(t *testing.T) {
	e := newEnv(t)
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey,
		Body: map[string]any{"provider": "fake-google", "model": "fake-google", "max_turns": 12, "token_budget": 50000}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, []bench.Request{{Agent: "llm", Provider: "fake-google", Model: "fake-google", MaxTurns: 12, TokenBudget: 50000}}, e.runner.reqs)

	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"unknown provider", map[string]any{"agent": "llm", "provider": "mistral"}},
		{"fake alone is the CLI's", map[string]any{"agent": "llm", "provider": "fake"}},
		{"llm without provider", map[string]any{"agent": "llm"}},
		{"unknown agent", map[string]any{"agent": "robot", "provider": "openai"}},
		{"scripted with a provider", map[string]any{"agent": "scripted", "provider": "openai"}},
		{"model without provider", map[string]any{"model": "gpt-5"}},
		{"too many turns", map[string]any{"provider": "openai", "max_turns": 1000}},
		{"negative budget", map[string]any{"provider": "openai", "token_budget": -1}},
		{"a key is not a provider", map[string]any{"provider": "sk-ant-api03-abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/benchmark", Key: adminKey, Body: tc.body})
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			require.Equal(t, "invalid_request", res.ErrCode(t))
			require.NotContains(t, string(res.Body), "sk-ant", "a value pasted as the provider is not echoed")
		})
	}
	require.Len(t, e.runner.reqs, 1, "no bad request reached the runner")
}

// The shape of replay_of (the replay kind's), repeat, judge and sinks is checked before the
// runner sees them (400, naming the field); what they name is the
// runner's to check (422).
func TestCheckBenchmarkExtras(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // "" means accepted
	}{
		{`{"replay_of":"20261201-020000-abcdef"}`, ""},
		{`{"replay_of":"r1","concurrency":8,"sinks":["braintrust"]}`, ""},
		{`{"repeat":3,"judge":"anthropic","sinks":["braintrust","langsmith"]}`, ""},
		{`{"repeat":-1}`, "repeat:"},
		{`{"repeat":11}`, "repeat:"},
		{`{"replay_of":"a/b"}`, "replay_of:"},
		{`{"replay_of":"` + strings.Repeat("r", 101) + `"}`, "replay_of:"},
		{`{"replay_of":"r1","only":["refund/"]}`, "do not apply"},
		{`{"replay_of":"r1","payments":"stripe-fake"}`, "do not apply"},
		{`{"replay_of":"r1","repeat":2}`, "do not apply"},
		{`{"replay_of":"r1","judge":"openai"}`, "do not apply"},
		{`{"replay_of":"r1","agent":"llm","provider":"fake-openai"}`, "do not apply"},
		{`{"judge":"` + strings.Repeat("j", 151) + `"}`, "judge:"},
		{`{"judge":"open\u0000ai"}`, "judge:"},
		{`{"sinks":[""]}`, "sinks[0]:"},
		{`{"sinks":["braintrust,langsmith"]}`, "sinks[0]:"},
		{`{"sinks":["a","b","c","d","e","f"]}`, "sinks:"},
	} {
		var req bench.Request
		require.NoError(t, json.Unmarshal([]byte(tc.body), &req), tc.body)
		err := checkRequest(&req)
		if tc.want == "" {
			require.NoError(t, err, tc.body)
			continue
		}
		require.True(t, strings.HasPrefix(err.Error(), "400 invalid_request: "), "%s: %v", tc.body, err)
		require.Contains(t, err.Error(), tc.want, tc.body)
	}
}

// The document's agent and provider enums are the registry's kinds and the
// one provider list, not lists of their own.
func TestOpenAPIAgentEnums(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				BenchmarkRequest struct {
					Properties map[string]struct {
						Enum []string `json:"enum"`
					} `json:"properties"`
				} `json:"BenchmarkRequest"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI, &doc))
	props := doc.Components.Schemas.BenchmarkRequest.Properties
	require.Equal(t, bench.AgentKinds(), props["agent"].Enum)
	require.Equal(t, agent.Providers, props["provider"].Enum)
	require.Equal(t, agent.Vias, props["via"].Enum)
}
