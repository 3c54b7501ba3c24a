package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// requireMarshalAgrees holds appendAttrs to json.Marshal: the same bytes,
// or the same error.
func requireMarshalAgrees(t *testing.T, a commitlayer.Attrs) {
	t.Helper()
	want, wantErr := json.Marshal(a)
	got, gotErr := appendAttrs([]byte("prefix"), a)
	if wantErr != nil {
		require.EqualError(t, gotErr, wantErr.Error())
		return
	}
	require.NoError(t, gotErr)
	require.Equal(t, "prefix"+string(want), string(got))
}

func TestAppendAttrsIsMarshal(t *testing.T) {
	for _, a := range []commitlayer.Attrs{
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
		{"attrs": commitlayer.Attrs{"a": int64(1)}},
		// json.Marshal refuses these.
		{"nan": math.NaN()}, {"inf": map[string]any{"x": []any{math.Inf(1)}}}, {"ch": make(chan int)},
	} {
		requireMarshalAgrees(t, a)
	}
	many := commitlayer.Attrs{}
	for i := range 40 {
		many[strings.Repeat("k", i%7)+string(rune('a'+i))] = int64(i)
	}
	requireMarshalAgrees(t, many)

	rng := rand.New(rand.NewPCG(23, 2))
	for range 5000 {
		requireMarshalAgrees(t, commitlayer.Attrs(randomMap(rng, 0)))
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
	k := rng.IntN(9)
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

// BenchmarkEncodeAttrs writes the attrs of a batch of 1 000 facts as the
// API hands them over (normalized) the way encodeFacts does, with
// appendAttrs into one buffer shared by the rows (marshal=append); and the
// way it did before, json.Marshal per fact and a string copy per row for
// insertFacts (marshal=json), measured in the same run.
func BenchmarkEncodeAttrs(b *testing.B) {
	attrs := make([]commitlayer.Attrs, 1000)
	for n := range attrs {
		attrs[n] = commitlayer.Attrs{"refund_id": fmt.Sprintf("re_%d", n), "amount": int64(100 + n), "currency": "USD",
			"reason": "requested", "status": "succeeded"}
	}
	out := make([]string, len(attrs))
	b.Run("marshal=append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf []byte
			ends := make([]int, 0, len(attrs))
			for _, a := range attrs {
				var err error
				if buf, err = appendAttrs(buf, a); err != nil {
					b.Fatal(err)
				}
				ends = append(ends, len(buf))
			}
			all, start := string(buf), 0
			for i, end := range ends {
				out[i], start = all[start:end], end
			}
		}
	})
	b.Run("marshal=json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, a := range attrs {
				m, err := json.Marshal(a)
				if err != nil {
					b.Fatal(err)
				}
				out[i] = string(m)
			}
		}
	})
}

// TestInsertFactsStoredColumns checks the stored attrs and link_keys of a
// batch against what json.Marshal and linkKeys make of each fact: rows of
// a batch share their buffers, and none may take another's bytes.
func TestInsertFactsStoredColumns(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	facts := []commitlayer.Fact{
		mkFact("payments", "x", "order:o1", "a", t0, nil),
		mkFact("payments", "x", "order:o1", "b", t0, commitlayer.Attrs{"amount": int64(1), "s": "<&>\u2028"}, "ticket:t1"),
		mkFact("payments", "x", "order:o2", "c", t0, commitlayer.Attrs{"big": map[string]any{"k": []any{1.5, nil}}},
			"ticket:t1", "customer:c1", "order:o9"),
		mkFact("payments", "x", "order:o3", "d", t0, commitlayer.Attrs{}),
		mkFact("payments", "x", "order:o3", "b", t0, commitlayer.Attrs{"dup": true}, "ticket:t2"), // a duplicate: skipped
		mkFact("payments", "x", "order:o3", "e", t0, commitlayer.Attrs{"n": int64(7), "int": 3}, "ticket:t3"),
	}
	res, err := testDB.InsertFacts(ctx, tn.ID, facts)
	require.NoError(t, err)
	require.Equal(t, 5, res.Inserted)
	for _, f := range facts {
		if f.ExternalID == "b" && f.Attrs["dup"] != nil {
			continue
		}
		want := "{}"
		if len(f.Attrs) > 0 {
			b, err := json.Marshal(f.Attrs)
			require.NoError(t, err)
			want = string(b)
		}
		links := make([]string, len(f.Links))
		for i, l := range f.Links {
			links[i] = string(l)
		}
		var same bool
		var keys, stored []string
		require.NoError(t, testDB.Pool().QueryRow(ctx, `SELECT attrs = $3::jsonb, link_keys, links FROM facts
			WHERE tenant_id = $1 AND source = 'payments' AND external_id = $2`, tn.ID, f.ExternalID, want).Scan(&same, &keys, &stored))
		require.True(t, same, "fact %s: attrs stored are not %s", f.ExternalID, want)
		if len(links) == 0 {
			require.Empty(t, keys, "fact %s", f.ExternalID)
			require.Empty(t, stored, "fact %s", f.ExternalID)
		} else {
			require.Equal(t, linkKeys(tn.ID, links), keys, "fact %s", f.ExternalID)
			require.Equal(t, links, stored, "fact %s", f.ExternalID)
		}
	}
}

func TestCheckTimeIsCheckTimes(t *testing.T) {
	for _, at := range []time.Time{t0, {}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("x", -2*3600)), time.Date(0, 12, 31, 23, 0, 0, 0, time.UTC)} {
		require.Equal(t, checkTimes("occurred_at", at), checkTime("occurred_at", at), "%v", at)
	}
}
