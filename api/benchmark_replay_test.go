package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The shape of replay_of, repeat, judge and sinks is checked before the
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
		var req BenchmarkRequest
		require.NoError(t, json.Unmarshal([]byte(tc.body), &req), tc.body)
		err := checkBenchmarkExtras(req)
		if tc.want == "" {
			require.NoError(t, err, tc.body)
			continue
		}
		var ae *apiError
		require.ErrorAs(t, err, &ae, tc.body)
		require.Equal(t, http.StatusBadRequest, ae.Status, tc.body)
		require.Contains(t, err.Error(), tc.want, tc.body)
	}
}
