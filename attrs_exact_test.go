package commitlayer_test

import (
	"encoding/json"
	"math"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
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
	stored, err := commitlayer.DecodeStoredAttrs([]byte(`{"amount":1.8446744073709552e+19}`))
	require.NoError(t, err)
	require.Equal(t, 1.8446744073709552e+19, stored["amount"])

	var a commitlayer.Attrs
	require.ErrorIs(t, json.Unmarshal([]byte(`{"amount":18446744073709551616}`), &a), commitlayer.ErrInexact)
}

// TestAttrsDecoding: attrs decode strictly through either JSON package:
// exact integers, a name given twice or invalid UTF-8 refused, a refused
// number named by where it is.
func TestAttrsDecoding(t *testing.T) {
	var a commitlayer.Attrs
	require.NoError(t, json.Unmarshal([]byte(`{"n":9223372036854775807,"f":12.5,"w":2500.0,"s":"é","l":[1,{"k":null}],"b":false}`), &a))
	require.Equal(t, commitlayer.Attrs{"n": int64(math.MaxInt64), "f": 12.5, "w": int64(2500), "s": "é",
		"l": []any{int64(1), map[string]any{"k": nil}}, "b": false}, a)
	require.NoError(t, jsonv2.Unmarshal([]byte(`null`), &a))
	require.Nil(t, a)
	for in, want := range map[string]string{
		`{"a":1,"a":2}`:              "duplicate",
		`{"a":1,"\u0061":2}`:         "duplicate",
		"{\"a\":\"\xff\"}":           "invalid UTF-8",
		`{"a":"\ud800"}`:             "surrogate",
		`[1]`:                        "must be an object",
		`{"a":{"b":[0,1e999]}}`:      `"/a/b/1"`,
		`{"a":18446744073709551616}`: "does not fit in 64 bits",
		`{"a":1`:                     "unexpected",
	} {
		err := jsonv2.Unmarshal([]byte(in), &a)
		require.ErrorContains(t, err, want, in)
		require.ErrorContains(t, json.Unmarshal([]byte(in), &a), want, in)
	}
}

// TestAttrsEncoding: attrs written by jsonv2 read back as they were; a
// NaN is refused; with Deterministic the keys come sorted.
func TestAttrsEncoding(t *testing.T) {
	a := commitlayer.Attrs{"n": int64(math.MinInt64), "i": 7, "f": 0.5, "s": "<é>", "b": true, "z": nil,
		"l": []any{int64(1), "x", map[string]any{"k": []string{"a"}}}, "m": map[string]any{"y": 2.5}}
	b, err := jsonv2.Marshal(a)
	require.NoError(t, err)
	var back commitlayer.Attrs
	require.NoError(t, json.Unmarshal(b, &back))
	want, err := a.Normalize()
	require.NoError(t, err)
	require.Equal(t, want, back)
	_, err = jsonv2.Marshal(commitlayer.Attrs{"x": map[string]any{"nan": math.NaN()}})
	require.Error(t, err)
	b, err = jsonv2.Marshal(commitlayer.Attrs{"b": 1, "a": 2, "c": 3}, jsonv2.Deterministic(true))
	require.NoError(t, err)
	require.Equal(t, `{"a":2,"b":1,"c":3}`, string(b))
}
