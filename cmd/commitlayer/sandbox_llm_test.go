package main

import (
	"testing"

	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/stretchr/testify/require"
)

// TestLLMOptionsCheckNamesTheFlag: an agent flag out of range is refused
// naming that flag; the defaults and 0 (the default) pass.
func TestLLMOptionsCheckNamesTheFlag(t *testing.T) {
	ok := llmOptions{agent: agent.KindLLM, provider: llmFake, maxTurns: agent.DefaultMaxTurns, maxTokens: agent.DefaultMaxTokens}
	require.NoError(t, ok.check())
	zero := ok
	zero.maxTurns, zero.maxTokens = 0, 0
	require.NoError(t, zero.check())
	for flag, o := range map[string]llmOptions{
		"-max-turns":    {agent: agent.KindLLM, provider: agent.FakeOpenAI, maxTurns: 101, maxTokens: 1},
		"-max-tokens":   {agent: agent.KindLLM, provider: agent.FakeOpenAI, maxTurns: 1, maxTokens: -1},
		"-token-budget": {agent: agent.KindLLM, provider: agent.FakeOpenAI, maxTurns: 1, maxTokens: 1, tokenBudget: -5},
	} {
		require.ErrorContains(t, o.check(), flag+": must", flag)
	}
	// The registry's messages, the flag named; a provider that is not one
	// is not echoed (a key pasted there stays off the terminal and logs).
	err := (&llmOptions{agent: agent.KindLLM, provider: "sk-ant-mistral"}).check()
	require.ErrorContains(t, err, "-provider: not a provider; use one of anthropic, openai, google, fake-anthropic, fake-openai, fake-google, or fake")
	require.NotContains(t, err.Error(), "sk-ant")
	require.ErrorContains(t, (&llmOptions{agent: agent.KindLLM}).check(), "-provider: not a provider")
	require.ErrorContains(t, (&llmOptions{agent: "robot"}).check(), "-agent: not an agent; use one of scripted, llm, replay")
	require.ErrorContains(t, (&llmOptions{agent: "scripted", provider: agent.FakeOpenAI}).check(), "-provider: needs agent llm")
	require.ErrorContains(t, (&llmOptions{provider: agent.FakeOpenAI}).check(), "-provider: needs agent llm", "no -agent is the scripted one")
	require.ErrorContains(t, (&llmOptions{agent: "scripted", model: "gpt-5"}).check(), "-model: needs agent llm")
	require.ErrorContains(t, (&llmOptions{agent: agent.KindLLM, provider: llmFake, model: "gpt-5"}).check(), "-provider fake runs each fake with its own model")

	require.ErrorContains(t, (&llmOptions{agent: "scripted", via: agent.ViaMCP}).check(), "-via: needs agent llm")
	require.NoError(t, (&llmOptions{agent: "scripted", via: agent.ViaDirect}).check())
	via := ok
	via.via = "grpc"
	require.ErrorContains(t, via.check(), `-via: not a path; use one of direct, mcp, otlp`)
	for _, v := range agent.Vias {
		via.via = v
		require.NoError(t, via.check(), v)
	}
}
