package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/llm"
)

// -replay, -repeat and -judge are checked while parsing the flags, before
// anything starts; a judge's key is never printed.
func TestSandboxReplayRepeatJudgeFlags(t *testing.T) {
	const key = "sk-ant-flagtest-must-not-be-printed"
	tests := []struct {
		name string
		key  string
		args []string
		want string // "" means accepted
	}{
		{"replay a run id", "", []string{"-replay", "20261201-020000-abcdef"}, ""},
		{"replay a file", "", []string{"-replay", "sandbox/results/latest.json", "-concurrency", "8"}, ""},
		{"repeat", "", []string{"-repeat", "3", "-only", "refund/"}, ""},
		{"judge with its key", key, []string{"-judge", "anthropic"}, ""},
		{"judge with a model", key, []string{"-judge", "anthropic/claude-test"}, ""},
		{"repeat too many", "", []string{"-repeat", "11"}, "-repeat must be between 1 and 10"},
		{"negative repeat", "", []string{"-repeat", "-1"}, "-repeat must be between"},
		{"unknown judge", "", []string{"-judge", "mistral"}, "not a provider"},
		{"judge without its key", "", []string{"-judge", "anthropic"}, "ANTHROPIC_API_KEY is not set"},
		{"replay with only", "", []string{"-replay", "r1", "-only", "refund/"}, "do not apply"},
		{"replay with repeat", "", []string{"-replay", "r1", "-repeat", "2"}, "do not apply"},
		{"replay with payments", "", []string{"-replay", "r1", "-payments", "stripe-fake"}, "do not apply"},
		{"replay with a judge whose key is set", key, []string{"-replay", "r1", "-judge", "anthropic"}, "do not apply"},
		{"replay with agent llm", "", []string{"-replay", "r1", "-agent", "llm", "-provider", "fake-openai"}, "-replay: a replay re-sends the recorded calls"},
		{"replay of a run id with a slash", "", []string{"-replay", "a b"}, "-replay: must be a benchmark run id"},
		{"agent replay without a run", "", []string{"-agent", "replay"}, "-replay: names the recorded run"},
		{"replay by agent and run", "", []string{"-agent", "replay", "-replay", "r1"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(llm.KeyEnv[llm.Anthropic], tc.key)
			var stderr bytes.Buffer
			o, err := parseSandboxFlags("sandbox", tc.args, &stderr)
			if tc.want == "" {
				require.NoError(t, err, stderr.String())
				return
			}
			require.Error(t, err)
			require.Contains(t, stderr.String(), tc.want)
			require.NotContains(t, stderr.String(), key)
			_ = o
		})
	}
}

func TestLooksLikeFile(t *testing.T) {
	require.True(t, looksLikeFile("sandbox/results/latest.json"))
	require.True(t, looksLikeFile("latest.json"))
	require.False(t, looksLikeFile("20261201-020000-abcdef"))
}
