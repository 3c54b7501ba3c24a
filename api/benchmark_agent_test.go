package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdminBenchmarkAgent checks a model-driven run's fields: a provider
// implies agent llm and reaches the runner; an unknown agent or provider,
// a provider on the scripted agent and bounds out of range are 400.
func TestAdminBenchmarkAgent(t *testing.T) {
	e := newEnv(t)
	res := e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey,
		body: map[string]any{"provider": "fake-google", "model": "fake-google", "max_turns": 12, "token_budget": 50000}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, []BenchmarkRequest{{Agent: "llm", Provider: "fake-google", Model: "fake-google", MaxTurns: 12, TokenBudget: 50000}}, e.bench.reqs)

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
			res := e.do(req{method: "POST", path: "/v1/admin/benchmark", key: adminKey, body: tc.body})
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			require.Equal(t, codeInvalidRequest, res.errCode(t))
			require.NotContains(t, string(res.Body), "sk-ant", "a value pasted as the provider is not echoed")
		})
	}
	require.Len(t, e.bench.reqs, 1, "no bad request reached the runner")
}
