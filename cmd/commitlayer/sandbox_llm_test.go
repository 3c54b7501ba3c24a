package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox/harness"
)

// TestLLMOptionsCheckNamesTheFlag: an agent flag out of range is refused
// naming that flag; the defaults and 0 (the default) pass.
func TestLLMOptionsCheckNamesTheFlag(t *testing.T) {
	ok := llmOptions{agent: harness.AgentLLM, provider: llmFake, maxTurns: harness.DefaultMaxTurns, maxTokens: harness.DefaultMaxTokens}
	require.NoError(t, ok.check())
	zero := ok
	zero.maxTurns, zero.maxTokens = 0, 0
	require.NoError(t, zero.check())
	for flag, o := range map[string]llmOptions{
		"-max-turns":    {agent: harness.AgentLLM, provider: harness.FakeOpenAI, maxTurns: 101, maxTokens: 1},
		"-max-tokens":   {agent: harness.AgentLLM, provider: harness.FakeOpenAI, maxTurns: 1, maxTokens: -1},
		"-token-budget": {agent: harness.AgentLLM, provider: harness.FakeOpenAI, maxTurns: 1, maxTokens: 1, tokenBudget: -5},
	} {
		require.ErrorContains(t, o.check(), flag+": must", flag)
	}
	require.ErrorContains(t, (&llmOptions{agent: harness.AgentLLM, provider: "mistral"}).check(), `-provider "mistral"`)
	require.ErrorContains(t, (&llmOptions{agent: "scripted", provider: harness.FakeOpenAI}).check(), "need -agent llm")

	require.ErrorContains(t, (&llmOptions{agent: "scripted", via: harness.ViaMCP}).check(), "-via mcp needs -agent llm")
	require.NoError(t, (&llmOptions{agent: "scripted", via: harness.ViaDirect}).check())
	via := ok
	via.via = "grpc"
	require.ErrorContains(t, via.check(), `-via: "grpc" is not a path; use one of direct, mcp, otlp`)
	for _, v := range harness.Vias {
		via.via = v
		require.NoError(t, via.check(), v)
	}
}
