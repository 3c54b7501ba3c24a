package client

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestFactsBodyIsMarshal: the body PostFacts sends is the bytes json.Marshal
// writes for {"facts": facts}, and a fact json.Marshal refuses fails the
// call naming it.
func TestFactsBodyIsMarshal(t *testing.T) {
	at := time.Date(2026, 12, 4, 9, 30, 0, 5, time.FixedZone("z", 3600))
	many := make([]commitlayer.Fact, 300)
	for i := range many {
		many[i] = commitlayer.Fact{Source: "ledger", Type: "note_added", Subject: commitlayer.Subject(fmt.Sprintf("account:a_%d", i)),
			ExternalID: fmt.Sprintf("n-%d", i), OccurredAt: at.Add(time.Duration(i) * time.Second),
			Attrs: commitlayer.Attrs{"n": int64(i), "text": "statement <line> & \"more\"", "f": 1.5e-7, "nested": map[string]any{"l": []any{nil, true}}}}
		if i%3 == 0 {
			many[i].Links = []commitlayer.Subject{"customer:c1"}
		}
	}
	for name, facts := range map[string][]commitlayer.Fact{
		"nil":   nil,
		"empty": {},
		"one":   many[:1],
		"many":  many,
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(map[string]any{"facts": facts})
			require.NoError(t, err)
			got, err := factsBody(facts)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
	bad := append([]commitlayer.Fact(nil), many[:3]...)
	bad[2].OccurredAt = time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := factsBody(bad)
	require.ErrorContains(t, err, "facts[2]")
	_, wantErr := json.Marshal(map[string]any{"facts": bad})
	require.Error(t, wantErr)
}

// BenchmarkFactsBody: a batch of 1 000 facts as bench scale posts them, by
// json.Marshal and by factsBody.
func BenchmarkFactsBody(b *testing.B) {
	now := time.Now().UTC()
	facts := make([]commitlayer.Fact, 1000)
	for i := range facts {
		facts[i] = commitlayer.Fact{Source: "ledger", Type: "note_added", Subject: commitlayer.Subject(fmt.Sprintf("account:w_%d", i/10)),
			ExternalID: fmt.Sprintf("ing-0-0-%d-%d", i/10, i%10), OccurredAt: now, Attrs: commitlayer.Attrs{"n": i % 10, "text": "statement line"}}
	}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(map[string]any{"facts": facts}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := factsBody(facts); err != nil {
				b.Fatal(err)
			}
		}
	})
}
