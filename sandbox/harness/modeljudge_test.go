package harness

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/llm/judge"
)

func TestParseJudge(t *testing.T) {
	for _, ok := range []string{"anthropic", "openai", "google", "openai/gpt-test", " google "} {
		_, _, err := ParseJudge(ok)
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{"", "mistral", "anthropic/has space", "/model"} {
		_, _, err := ParseJudge(bad)
		require.Error(t, err, bad)
	}
}

// The ModelJudge activity asks each provider's fake through the real
// adapter and gives the judge's verdict; an answer that does not parse is
// UNKNOWN; a missing key fails for good, never with the key in the error.
func TestModelJudgeActivity(t *testing.T) {
	tr := llm.Trajectory{Instruction: "refund order o_1", Report: llm.Report{Status: commitlayer.ClaimSuccess},
		Calls: []llm.Attempt{{Tool: "refund", Attempt: 1, Status: 403, Response: `{"error":{"code":"forbidden"}}`}}}
	for _, p := range llm.Providers {
		t.Run(p, func(t *testing.T) {
			srv, err := fake.Start(p, fake.RuleJudge{})
			require.NoError(t, err)
			defer srv.Close()
			a := &Activities{JudgeProviders: func(provider, model string) (llm.Provider, error) {
				require.Equal(t, p, provider)
				return llm.New(srv.Config())
			}}
			v, err := a.ModelJudge(context.Background(), ModelJudgeInput{Judge: p, Trajectory: tr})
			require.NoError(t, err)
			require.Equal(t, commitlayer.StatusFail, v.Verdict)
			require.Equal(t, judge.Evaluate(tr).Reason, v.Reason)
			require.True(t, strings.HasPrefix(v.Name, "model:"+p+"/"), v.Name)

			confused, err := fake.Start(p, fake.PolicyFunc(func(fake.Turn) (fake.Reply, error) { return fake.Reply{Text: "it looks fine"}, nil }))
			require.NoError(t, err)
			defer confused.Close()
			a.JudgeProviders = func(string, string) (llm.Provider, error) { return llm.New(confused.Config()) }
			v, err = a.ModelJudge(context.Background(), ModelJudgeInput{Judge: p, Trajectory: tr})
			require.NoError(t, err)
			require.Equal(t, commitlayer.StatusUnknown, v.Verdict)
		})
	}
	const key = "sk-ant-activity-test-key"
	t.Setenv(llm.KeyEnv[llm.Anthropic], "")
	a := &Activities{}
	_, err := a.ModelJudge(context.Background(), ModelJudgeInput{Judge: "anthropic", Trajectory: tr})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.True(t, appErr.NonRetryable())
	require.Contains(t, err.Error(), "ANTHROPIC_API_KEY is not set")
	require.NotContains(t, err.Error(), key)
	// A key the provider refuses (the fake answers 401 as Anthropic does):
	// the judge fails for good and the error does not carry the key.
	refusing, err := fake.Start(llm.Anthropic, fake.RuleJudge{})
	require.NoError(t, err)
	defer refusing.Close()
	t.Setenv(llm.KeyEnv[llm.Anthropic], key)
	t.Setenv(llm.BaseURLEnv[llm.Anthropic], refusing.BaseURL())
	_, err = a.ModelJudge(context.Background(), ModelJudgeInput{Judge: "anthropic", Trajectory: tr})
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.True(t, appErr.NonRetryable(), "%v", err)
	require.NotContains(t, err.Error(), key)
	_, err = a.ModelJudge(context.Background(), ModelJudgeInput{Judge: "nosuch", Trajectory: tr})
	require.ErrorContains(t, err, "not a provider")
}
