package commitlayer

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireMarshalAgrees holds Attrs.AppendJSON to json.Marshal: the same bytes,
// or the same error.
func requireMarshalAgrees(t *testing.T, a Attrs) {
	t.Helper()
	want, wantErr := json.Marshal(a)
	got, gotErr := a.AppendJSON([]byte("prefix"))
	if wantErr != nil {
		require.EqualError(t, gotErr, wantErr.Error())
		return
	}
	require.NoError(t, gotErr)
	require.Equal(t, "prefix"+string(want), string(got))
}

func TestAttrsAppendJSONIsMarshal(t *testing.T) {
	for _, a := range []Attrs{
		nil, {},
		{"amount": int64(2500), "currency": "USD", "ok": true, "no": false, "none": nil},
		{"min": int64(math.MinInt64), "max": int64(math.MaxInt64), "zero": int64(0)},
		{"f": 0.5, "g": -1.25e-3, "h": 1e-7, "i": 1e21, "j": 1e20, "k": 123456.789, "l": 5e-324, "m": math.MaxFloat64,
			"n": math.Copysign(0, -1), "o": 1e-6, "p": 9.999999e-7, "q": 2.5e-10},
		{"s": "<a href=\"x\">&amp;</a>", "t": "tab\tnl\ncr\rbs\\bell\x07\b\f\x00\x1f\x7f", "u": "\u2028\u2029 café 😀", "v": "\xff\xfe bad \xed\xa0\x80"},
		{"<k>": int64(1), "k&": int64(2), "\u2028": int64(3), "": int64(4), "b": int64(5), "a": int64(6), "B": int64(7), "é": int64(8)},
		{"nested": map[string]any{"a": []any{int64(1), map[string]any{"b": nil}, []any{}}, "e": map[string]any{}}},
		{"nilslice": []any(nil), "nilmap": map[string]any(nil)},
		// Types the normalizer never leaves, for json.Marshal to write.
		{"int": 5, "strs": []string{"a"}, "time": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "num": json.Number("1.50")},
		{"deep": map[string]any{"x": []any{1}}},
		{"attrs": Attrs{"a": int64(1)}},
		// json.Marshal refuses these.
		{"nan": math.NaN()}, {"inf": map[string]any{"x": []any{math.Inf(1)}}}, {"ch": make(chan int)},
	} {
		requireMarshalAgrees(t, a)
	}
	many := Attrs{}
	for i := range 40 {
		many[strings.Repeat("k", i%7)+string(rune('a'+i))] = int64(i)
	}
	requireMarshalAgrees(t, many)

	rng := rand.New(rand.NewPCG(23, 2))
	for range 5000 {
		requireMarshalAgrees(t, Attrs(randomMap(rng, 0)))
	}
}

func randomMap(rng *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range rng.IntN(5) {
		m[randomString(rng)] = randomValue(rng, depth+1)
	}
	return m
}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(10)
	if depth > 3 && k < 2 {
		k += 2
	}
	switch k {
	case 0:
		return randomMap(rng, depth)
	case 1:
		var out []any
		if rng.IntN(4) > 0 {
			out = []any{}
		}
		for range rng.IntN(4) {
			out = append(out, randomValue(rng, depth+1))
		}
		return out
	case 2:
		return rng.Int64() >> rng.IntN(64)
	case 3:
		return -rng.Int64() >> rng.IntN(64)
	case 4:
		return math.Float64frombits(rng.Uint64())
	case 5:
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30))
	case 6:
		return rng.IntN(2) == 0
	case 7:
		return nil
	case 8:
		// A caller's own Go values, before any normalizing.
		switch rng.IntN(9) {
		case 0:
			return int(rng.Int64() >> rng.IntN(64))
		case 1:
			return int32(rng.Uint32())
		case 2:
			return uint8(rng.Uint32())
		case 3:
			return rng.Uint64() >> rng.IntN(64)
		case 4:
			return math.Float32frombits(rng.Uint32())
		case 5:
			return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30)))
		case 6:
			ss := []string{}
			for range rng.IntN(3) {
				ss = append(ss, randomString(rng))
			}
			return ss
		case 7:
			return Attrs(randomMap(rng, depth+1))
		}
		return int16(rng.Uint32())
	}
	return randomString(rng)
}

func randomString(rng *rand.Rand) string {
	pieces := []string{"a", "Z", "9", " ", "<", ">", "&", `"`, `\`, "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "😀",
		"\u2028", "\u2029", "\xff", "\xc3", "\xed\xa0\x80", "\ufffd"}
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// TestFactAppendJSONIsMarshal: Fact.AppendJSON writes what json.Marshal
// writes for a fact, or fails as it does, leaving the buffer as given.
func TestFactAppendJSONIsMarshal(t *testing.T) {
	check := func(t *testing.T, f Fact) {
		t.Helper()
		want, wantErr := json.Marshal(&f)
		got, gotErr := f.AppendJSON([]byte("prefix"))
		if wantErr != nil {
			require.Error(t, gotErr)
			require.Equal(t, wantErr.Error(), gotErr.Error())
			require.Equal(t, "prefix", string(got))
			return
		}
		require.NoError(t, gotErr)
		require.Equal(t, "prefix"+string(want), string(got))
	}
	at := time.Date(2026, 12, 4, 17, 0, 0, 123456789, time.UTC)
	base := Fact{Source: "payments", Type: "refund_issued", Subject: "order:o1", ExternalID: "re_1", OccurredAt: at,
		Attrs: Attrs{"amount": int64(100), "currency": "USD"}}
	cases := map[string]func(f *Fact){
		"plain":            func(*Fact) {},
		"nil attrs":        func(f *Fact) { f.Attrs = nil },
		"empty attrs":      func(f *Fact) { f.Attrs = Attrs{} },
		"links":            func(f *Fact) { f.Links = []Subject{"customer:c1", "ticket:<t&1>"} },
		"empty links":      func(f *Fact) { f.Links = []Subject{} },
		"seq":              func(f *Fact) { f.Seq = 42 },
		"negative seq":     func(f *Fact) { f.Seq = -1 },
		"zone":             func(f *Fact) { f.OccurredAt = at.In(time.FixedZone("x", -5*3600-30*60)) },
		"zero time":        func(f *Fact) { f.OccurredAt = time.Time{} },
		"year 10000":       func(f *Fact) { f.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"year -1":          func(f *Fact) { f.OccurredAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		"odd zone":         func(f *Fact) { f.OccurredAt = at.In(time.FixedZone("y", 30)) },
		"html and unicode": func(f *Fact) { f.ExternalID, f.Subject = "<a&b>\u2028\xff\x00", "order:é😀" },
		"NaN attr":         func(f *Fact) { f.Attrs = Attrs{"x": math.NaN()} },
		"caller's type":    func(f *Fact) { f.Attrs = Attrs{"when": at, "n": 3, "u": uint8(7)} },
		"unmarshalable":    func(f *Fact) { f.Attrs = Attrs{"ch": make(chan int)} },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			f := base
			mod(&f)
			check(t, f)
		})
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		f := Fact{Source: randomString(rng), Type: randomString(rng), Subject: Subject(randomString(rng)),
			ExternalID: randomString(rng), OccurredAt: time.Unix(rng.Int64N(1<<36)-1<<35, rng.Int64N(1e9)).In(time.FixedZone("r", rng.IntN(100000)-50000)),
			Attrs: Attrs(randomMap(rng, 0)), Seq: rng.Int64N(3)}
		for range rng.IntN(3) {
			f.Links = append(f.Links, Subject(randomString(rng)))
		}
		check(t, f)
	}
}
