package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

// TestSandboxPaymentsFlagRefusedUpFront: a bad backend, a non-refund
// scenario on Stripe, and stripe without a (test) key are refused while
// parsing the flags, before anything starts; the message names what was
// wrong and never shows the key.
func TestSandboxPaymentsFlagRefusedUpFront(t *testing.T) {
	const live = "sk_live_51ThisIsNotATestKeyAndMustNotBePrinted"
	tests := []struct {
		name string
		key  string
		args []string
		want string // "" means accepted
	}{
		{"default is the sandbox", "", nil, ""},
		{"stripe-fake needs no key", "", []string{"-payments", "stripe-fake"}, ""},
		{"stripe-fake refund/ only", "", []string{"-payments", "stripe-fake", "-only", "refund/"}, ""},
		{"stripe with a test key", "sk_test_abc123", []string{"-payments", "stripe", "-only", "refund/"}, ""},
		{"unknown backend", "", []string{"-payments", "paypal"}, "payments"},
		{"payout on stripe-fake", "", []string{"-payments", "stripe-fake", "-only", "payout/"}, "runs only refund/ scenarios"},
		{"stripe without a key", "", []string{"-payments", "stripe"}, stripepay.EnvKey + " is not set"},
		{"stripe with a live key", live, []string{"-payments", "stripe"}, "test-mode secret key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(stripepay.EnvKey, tc.key)
			var stderr bytes.Buffer
			_, err := parseSandboxFlags("sandbox", tc.args, &stderr)
			if tc.want == "" {
				require.NoError(t, err, stderr.String())
				return
			}
			require.Error(t, err)
			require.Contains(t, stderr.String(), tc.want)
			require.NotContains(t, stderr.String(), live)
		})
	}
}
