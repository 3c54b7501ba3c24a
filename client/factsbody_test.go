package client

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestFactsBody: the body PostFacts sends reads back as the facts, and a
// fact that cannot be encoded fails the call naming it.
func TestFactsBody(t *testing.T) {
	at := time.Date(2026, 12, 4, 9, 30, 0, 5, time.UTC)
	facts := make([]commitlayer.Fact, 30)
	for i := range facts {
		facts[i] = commitlayer.Fact{Source: "ledger", Type: "note_added", Subject: commitlayer.Subject(fmt.Sprintf("account:a_%d", i)),
			ExternalID: fmt.Sprintf("n-%d", i), OccurredAt: at.Add(time.Duration(i) * time.Second),
			Attrs: commitlayer.Attrs{"n": int64(i), "text": "statement <line> & \"more\"", "f": 1.5e-7, "nested": map[string]any{"l": []any{nil, true}}}}
		if i%3 == 0 {
			facts[i].Links = []commitlayer.Subject{"customer:c1"}
		}
	}
	b, err := jsonBody(FactBatch{Facts: facts})
	require.NoError(t, err)
	var got struct{ Facts []commitlayer.Fact }
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, facts, got.Facts)
	require.NotContains(t, string(b), `"seq"`, "a fact not stored has no seq")

	facts[2].OccurredAt = time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = jsonBody(FactBatch{Facts: facts})
	require.ErrorContains(t, err, "/facts/2/occurred_at")
}

// BenchmarkFactsBody: a batch of 1 000 facts as bench scale posts them, by
// encoding/json (the baseline) and by factsBody, in the same run.
func BenchmarkFactsBody(b *testing.B) {
	now := time.Now().UTC()
	facts := make([]commitlayer.Fact, 1000)
	for i := range facts {
		facts[i] = commitlayer.Fact{Source: "ledger", Type: "note_added", Subject: commitlayer.Subject(fmt.Sprintf("account:w_%d", i/10)),
			ExternalID: fmt.Sprintf("ing-0-0-%d-%d", i/10, i%10), OccurredAt: now, Attrs: commitlayer.Attrs{"n": i % 10, "text": "statement line"}}
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(map[string]any{"facts": facts}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jsonBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonBody(FactBatch{Facts: facts}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
