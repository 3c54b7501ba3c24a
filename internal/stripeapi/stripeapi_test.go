package stripeapi_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v79"

	"github.com/commitlayer/commitlayer/internal/stripeapi"
)

func TestNewChecksBaseURL(t *testing.T) {
	for _, base := range []string{"ftp://x", "not a url", "http://"} {
		_, err := stripeapi.New(stripeapi.Config{Key: "sk_test_x", BaseURL: base})
		require.ErrorContains(t, err, "is not an http(s) URL", base)
	}
	_, err := stripeapi.New(stripeapi.Config{Key: "sk_test_x"})
	require.NoError(t, err, "the default is api.stripe.com (no request is made)")
}

func TestDescribeLeavesOutAuthMessages(t *testing.T) {
	const key = "sk_test_abcdefghijklmnop1234"
	tests := []struct {
		name string
		err  error
		want string
		not  string
	}{
		{"401", &stripe.Error{HTTPStatusCode: http.StatusUnauthorized, Type: stripe.ErrorTypeInvalidRequest,
			Msg: "Invalid API Key provided: " + key}, "stripe answered 401 invalid_request_error", key},
		{"403", &stripe.Error{HTTPStatusCode: http.StatusForbidden, Msg: "The provided key '" + key + "' does not have"}, "stripe answered 403", key},
		{"400", &stripe.Error{HTTPStatusCode: 400, Type: stripe.ErrorTypeInvalidRequest, Code: stripe.ErrorCodeAmountTooLarge,
			Param: "amount", Msg: "Refund amount is greater"}, "stripe answered 400 invalid_request_error amount_too_large (param amount): Refund amount is greater", ""},
		{"transport", errors.New("dial tcp 127.0.0.1:1: connection refused"), "stripe request failed: dial tcp", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := stripeapi.Describe(tc.err)
			require.Contains(t, got, tc.want)
			if tc.not != "" {
				require.NotContains(t, got, tc.not)
				require.NotContains(t, got, "1234")
			}
		})
	}
}
