package agent_test

import (
	"errors"
	"testing"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/stretchr/testify/require"
)

// TestSpecNormalize: defaults filled in; every bad field a field error,
// the value never echoed.
func TestSpecNormalize(t *testing.T) {
	s, err := agent.Spec{Provider: agent.FakeGoogle}.Normalize()
	require.NoError(t, err)
	require.Equal(t, agent.Spec{Kind: agent.KindLLM, Provider: agent.FakeGoogle, Model: "fake-google", MaxTurns: agent.DefaultMaxTurns, MaxTokens: agent.DefaultMaxTokens}, s)
	s, err = agent.Spec{Provider: llm.OpenAI}.Normalize()
	require.NoError(t, err)
	require.Equal(t, llm.DefaultModels[llm.OpenAI], s.Model)
	require.False(t, s.Fake())
	for _, bad := range []agent.Spec{
		{Provider: "mistral"}, {Kind: "robot", Provider: llm.OpenAI}, {Provider: llm.OpenAI, MaxTurns: 101},
		{Provider: llm.OpenAI, MaxTokens: -1}, {Provider: llm.OpenAI, TokenBudget: -5},
		{Provider: llm.OpenAI, Model: "a\nb"}, {Provider: llm.OpenAI, Via: "grpc"},
	} {
		_, err := bad.Normalize()
		var fe *commitlayer.FieldError
		require.True(t, errors.As(err, &fe), "%+v: %v", bad, err)
		require.NotContains(t, fe.Reason, "mistral")
		require.NotContains(t, fe.Reason, "robot")
	}
}

// TestAgentProviders: the names a run accepts are llm's providers, then a
// fake of each, as the admin route and the command line document them.
func TestAgentProviders(t *testing.T) {
	require.Equal(t, []string{"anthropic", "openai", "google", "fake-anthropic", "fake-openai", "fake-google"}, agent.Providers)
	require.Equal(t, []string{agent.FakeAnthropic, agent.FakeOpenAI, agent.FakeGoogle}, agent.FakeProviders)
}
