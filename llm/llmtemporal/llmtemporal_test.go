package llmtemporal_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/llmtemporal"
)

func TestApplicationError(t *testing.T) {
	cases := []struct {
		err          *llm.Error
		nonRetryable bool
		delay        time.Duration
	}{
		{&llm.Error{Provider: "openai", Kind: llm.KindRateLimited, Status: 429, RetryAfter: 3 * time.Second}, false, 3 * time.Second},
		{&llm.Error{Provider: "openai", Kind: llm.KindServer, Status: 503}, false, 0},
		{&llm.Error{Provider: "openai", Kind: llm.KindTimeout}, false, 0},
		{&llm.Error{Provider: "google", Kind: llm.KindAuth, Status: 400}, true, 0},
		{&llm.Error{Provider: "anthropic", Kind: llm.KindBadRequest, Status: 400}, true, 0},
		{&llm.Error{Provider: "anthropic", Kind: llm.KindMalformed}, true, 0},
		{&llm.Error{Kind: llm.KindLimit}, true, 0},
	}
	for _, tc := range cases {
		err := llmtemporal.ApplicationError(tc.err)
		var ae *temporal.ApplicationError
		require.True(t, errors.As(err, &ae))
		require.Equal(t, tc.nonRetryable, ae.NonRetryable(), tc.err.Error())
		require.Equal(t, tc.delay, ae.NextRetryDelay())
		require.Equal(t, "llm."+string(tc.err.Kind), ae.Type())
		require.Equal(t, tc.err.Kind, llmtemporal.KindOf(err))
		require.Equal(t, tc.err.Error(), ae.Message())
		// The policy agrees with the flag.
		p := llmtemporal.RetryPolicy()
		require.Equal(t, tc.nonRetryable, contains(p.NonRetryableErrorTypes, ae.Type()))
	}
	plain := errors.New("boom")
	require.Equal(t, plain, llmtemporal.ApplicationError(plain))
	require.Equal(t, llm.ErrorKind(""), llmtemporal.KindOf(plain))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
