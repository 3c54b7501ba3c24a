package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/agent"
)

// TestModelsNeedTheKeyOfTheNamedProvider: a real provider is built with
// the key of its own variable only, and says which one is missing without
// showing any key.
func TestModelsNeedTheKeyOfTheNamedProvider(t *testing.T) {
	const key = "sk-proj-secret-openai-key-000"
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", key)
	t.Setenv("OPENAI_BASE_URL", "")
	m := &Models{}
	defer m.Close()
	_, err := m.Provider(llm.Anthropic, "claude-haiku-4-5")
	require.ErrorContains(t, err, "ANTHROPIC_API_KEY is not set")
	p, err := m.Provider(llm.OpenAI, "gpt-5-mini")
	require.NoError(t, err)
	require.Equal(t, "gpt-5-mini", p.Model())
	require.NotContains(t, fmt.Sprintf("%v %+v %#v %s", p, p, p, err), key, "the provider never shows its key")
	again, err := m.Provider(llm.OpenAI, "gpt-5-mini")
	require.NoError(t, err)
	require.Same(t, p, again)
	f, err := m.Provider(agent.FakeOpenAI, "fake-openai")
	require.NoError(t, err)
	require.Equal(t, llm.OpenAI, f.Name())
	srv, err := m.Fake(agent.FakeOpenAI, "fake-openai")
	require.NoError(t, err)
	require.NotNil(t, srv)
	_, err = m.Fake(llm.OpenAI, "gpt-5-mini")
	require.Error(t, err)
}

// TestModelToolsOfferEveryToolWithAKeyOnWrites: the model sees the
// scripted agent's tools, path arguments required, an optional
// idempotency_key on every write and none on reads.
func TestModelToolsOfferEveryToolWithAKeyOnWrites(t *testing.T) {
	tools := agent.ModelTools()
	require.Len(t, tools, len(agent.Tools))
	for i, tool := range tools {
		spec := agent.Tools[i]
		require.Equal(t, spec.Name, tool.Name)
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		require.NoError(t, json.Unmarshal(tool.Schema, &s), tool.Name)
		require.Equal(t, "object", s.Type)
		_, keyed := s.Properties[agent.KeyArg]
		require.Equal(t, spec.Write, keyed, tool.Name)
		for _, r := range s.Required {
			require.Contains(t, spec.Path, "{"+r+"}", tool.Name)
		}
	}
}

// TestModelArgsSplitsTheKey: the key leaves the arguments; a key that is
// not a string and arguments that are not an object are refused.
func TestModelArgsSplitsTheKey(t *testing.T) {
	args, key, err := agent.ModelArgs(json.RawMessage(`{"order_id":"o_1","amount":2500,"idempotency_key":"k1"}`))
	require.NoError(t, err)
	require.Equal(t, "k1", key)
	require.Equal(t, map[string]any{"order_id": "o_1", "amount": json.Number("2500")}, args)
	_, _, err = agent.ModelArgs(json.RawMessage(`{"idempotency_key":7}`))
	require.ErrorContains(t, err, "idempotency_key")
	_, _, err = agent.ModelArgs(json.RawMessage(`[1]`))
	require.Error(t, err)
	at := agent.Attempt(llm.Attempt{Tool: "refund"}, errors.New(`argument "order_id" is required`))
	require.Equal(t, 400, at.Status)
	require.True(t, strings.Contains(at.Response, "invalid_arguments"))
}

// TestTemperamentMirrorsTheProfile: the fake model behaves as the scripted
// profile of the scenario it plays.
func TestTemperamentMirrorsTheProfile(t *testing.T) {
	require.Equal(t, "plain", agent.Temperament(agent.Profile{}).Name)
	k := agent.Temperament(agent.Profile{RetryWithKey: true})
	require.True(t, k.UseKey)
	require.Equal(t, 1, k.Retries)
	n := agent.Temperament(agent.Profile{RetryWithoutKey: true, Retries: 2})
	require.False(t, n.UseKey)
	require.Equal(t, 2, n.Retries)
	require.True(t, agent.Temperament(agent.Profile{ClaimSuccessOnError: true}).ClaimSuccessOnError)
	require.True(t, agent.Temperament(agent.Profile{FollowInstructions: true}).FollowInjected)
}
