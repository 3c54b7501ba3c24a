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
	require.ErrorContains(t, (&llmOptions{agent: agent.KindLLM, provider: "mistral"}).check(), `-provider "mistral"`)
	require.ErrorContains(t, (&llmOptions{agent: "scripted", provider: agent.FakeOpenAI}).check(), "need -agent llm")

	require.ErrorContains(t, (&llmOptions{agent: "scripted", via: agent.ViaMCP}).check(), "-via mcp needs -agent llm")
	require.NoError(t, (&llmOptions{agent: "scripted", via: agent.ViaDirect}).check())
	via := ok
	via.via = "grpc"
	require.ErrorContains(t, via.check(), `-via: "grpc" is not a path; use one of direct, mcp, otlp`)
	for _, v := range agent.Vias {
		via.via = v
		require.NoError(t, via.check(), v)
	}
}
