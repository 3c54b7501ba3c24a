package contracts_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// TestDigestFacts: each kind once, in the order first met, with its
// earliest time; links said.
func TestDigestFacts(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := func(source, typ, id string, off time.Duration, links ...commitlayer.Subject) commitlayer.Fact {
		return commitlayer.Fact{Source: source, Type: typ, Subject: "order:o_1", ExternalID: id, OccurredAt: t0.Add(off), Links: links}
	}
	require.Nil(t, contracts.DigestFacts(nil))
	d := contracts.DigestFacts([]commitlayer.Fact{
		f("payments", "refund_created", "r1", time.Hour),
		f("tickets", "note_added", "n1", 2*time.Hour),
		f("payments", "refund_created", "r2", -time.Hour),
		f("payments", "refund_created", "r3", 0),
	})
	require.False(t, d.Linked)
	require.Equal(t, []contracts.KindSince{
		{FactType: commitlayer.FactType{Source: "payments", Type: "refund_created"}, Earliest: t0.Add(-time.Hour)},
		{FactType: commitlayer.FactType{Source: "tickets", Type: "note_added"}, Earliest: t0.Add(2 * time.Hour)},
	}, d.Kinds)
	require.True(t, contracts.DigestFacts([]commitlayer.Fact{f("tickets", "note_added", "n", 0), f("tickets", "note_added", "l", 0, "ticket:t_1")}).Linked)
}
