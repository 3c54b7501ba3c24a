package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// BenchmarkEncodeAttrs writes the attrs of a batch of 1 000 facts as the
// API hands them over (normalized) the way encodeFacts does, with
// Attrs.AppendJSON into one buffer shared by the rows (marshal=append); and the
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
				if buf, err = a.AppendJSON(buf); err != nil {
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
