package commitlayer_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestNumbersKeptExactOrRefused: integers are int64 or refused, never
// rounded; non-integers beyond 2^53 are refused. On HEAD 2^64 became
// 1.8446744073709552e19, equal to 2^64+1.
func TestNumbersKeptExactOrRefused(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any // nil: refused
	}{
		{"9223372036854775807", int64(math.MaxInt64)},  // 2^63−1
		{"-9223372036854775808", int64(math.MinInt64)}, // −2^63
		{"9223372036854775808", nil},                   // 2^63
		{"-9223372036854775809", nil},
		{"18446744073709551616", nil}, // 2^64
		{"18446744073709551617", nil}, // 2^64+1
		{"123456789012345678901234567890", nil},
		{"1e19", nil},
		{"9007199254740993.5", nil},
		{"9007199254740992.0", nil}, // 2^53 written as a float
		{"9007199254740991.0", int64(9007199254740991)},
		{"2500.0", int64(2500)},
		{"12.5", 12.5},
		{"0", int64(0)},
	} {
		got, err := commitlayer.NormalizeValue(map[string]any{"amount": json.Number(tc.in)})
		if tc.want == nil {
			require.ErrorIs(t, err, commitlayer.ErrInexact, tc.in)
			require.Contains(t, err.Error(), "amount: ", "the error names the field")
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got.(map[string]any)["amount"], tc.in)
	}
	_, err := commitlayer.NormalizeValue(map[string]any{"a": []any{float64(1 << 63)}})
	require.ErrorIs(t, err, commitlayer.ErrInexact)
	_, err = commitlayer.NormalizeValue(uint64(1 << 63))
	require.ErrorIs(t, err, commitlayer.ErrInexact)

	// Stored values read back leniently (a row from before the rule).
	got, err := commitlayer.NormalizeStoredValue(map[string]any{"amount": json.Number("1.8446744073709552e+19")})
	require.NoError(t, err)
	require.Equal(t, 1.8446744073709552e+19, got.(map[string]any)["amount"])

	var a commitlayer.Attrs
	require.ErrorIs(t, json.Unmarshal([]byte(`{"amount":18446744073709551616}`), &a), commitlayer.ErrInexact)
}
