package llm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/llm"
)

func TestCostOf(t *testing.T) {
	u := llm.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}
	cases := []struct {
		model string
		known bool
		nano  int64
	}{
		{"claude-sonnet-4-5", true, 3_000_000_000 + 1_500_000_000},
		{"claude-sonnet-4-5-20250929", true, 4_500_000_000},
		{"gpt-5-mini-2025-08-07", true, 250_000_000 + 200_000_000},
		{"gpt-5", true, 1_250_000_000 + 1_000_000_000},
		{"gemini-2.5-flash-lite", true, 100_000_000 + 40_000_000},
		{"gemini-2.5-flash-latest", true, 300_000_000 + 250_000_000},
		{"fake-openai", false, 0},
		{"gpt-5-turbo", false, 0}, // not a dated suffix: not gpt-5's price
	}
	for _, tc := range cases {
		c := llm.CostOf(tc.model, u)
		require.Equal(t, tc.known, c.Known, tc.model)
		require.Equal(t, tc.nano, c.NanoUSD, tc.model)
	}
	require.Equal(t, "unknown", llm.CostOf("x", u).String())
	require.Equal(t, "$4.5000", llm.CostOf("claude-sonnet-4-5", u).String())
}

func TestBudget(t *testing.T) {
	b := llm.Budget{Limit: 1000}
	require.NoError(t, b.Check())
	require.Equal(t, 512, b.MaxTokens(512))
	b.Charge(llm.Usage{InputTokens: 700, OutputTokens: 100})
	require.Equal(t, int64(200), b.Remaining())
	require.Equal(t, 200, b.MaxTokens(512))
	b.Charge(llm.Usage{InputTokens: 300})
	require.True(t, b.Exhausted())
	err := b.Check()
	e, ok := llm.AsError(err)
	require.True(t, ok)
	require.Equal(t, llm.KindLimit, e.Kind)
	require.False(t, e.Retryable())
	require.ErrorContains(t, err, "1100 of 1000 tokens")

	unlimited := llm.Budget{}
	unlimited.Charge(llm.Usage{InputTokens: 1 << 40})
	require.NoError(t, unlimited.Check())
	require.Equal(t, int64(-1), unlimited.Remaining())
	require.Equal(t, 512, unlimited.MaxTokens(512))
}

func TestToolOutcomeRoundTrip(t *testing.T) {
	cases := []llm.ToolOutcome{
		{Status: 200, Body: `{"id": "o_1", "amount": 2500}`},
		{Status: 503, Body: "upstream unavailable"},
		{Error: "timeout: context deadline exceeded"},
		{Status: 204},
	}
	for _, o := range cases {
		got, ok := llm.ParseToolOutcome(o.Content())
		require.True(t, ok, o.Content())
		require.Equal(t, o.Status, got.Status)
		require.Equal(t, o.Error, got.Error)
		if o.Status == 200 {
			require.JSONEq(t, o.Body, got.Body)
		} else {
			require.Equal(t, o.Body, got.Body)
		}
	}
	_, ok := llm.ParseToolOutcome("plain text")
	require.False(t, ok)
	require.True(t, llm.ToolOutcome{Status: 429}.Retryable())
	require.True(t, llm.ToolOutcome{Error: "reset"}.Retryable())
	require.False(t, llm.ToolOutcome{Status: 403}.Retryable())
	require.False(t, llm.ToolOutcome{Status: 200}.Retryable())
}
