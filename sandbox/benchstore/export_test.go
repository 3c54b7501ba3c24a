package benchstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore/benchstoretest"
)

func TestTenantExports(t *testing.T) {
	d := benchstoretest.Store(t)
	ctx := context.Background()
	run := fmt.Sprintf("run-cb-%d", time.Now().UnixNano()) // the test database outlives the test
	a, _, err := d.CreateTenant(ctx, "export a")
	require.NoError(t, err)
	b, _, err := d.CreateTenant(ctx, "export b")
	require.NoError(t, err)

	_, _, err = d.PutContract(ctx, a.ID, "note_anything", []byte(`{"id":"note_anything","kind":"action","settlement":"1m","watch":"1m","sources":["tickets"],`+
		`"effects":[{"id":"note","source":"tickets","type":"note_added"}]}`))
	require.NoError(t, err)
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	_, err = d.InsertFacts(ctx, a.ID, []commitlayer.Fact{
		{Source: "tickets", Type: "note_added", Subject: "ticket:t_2", ExternalID: "n2", OccurredAt: at.Add(2 * time.Minute), Attrs: commitlayer.Attrs{}},
		{Source: "tickets", Type: "note_added", Subject: "ticket:t_1", ExternalID: "n1", OccurredAt: at.Add(time.Minute),
			Attrs: commitlayer.Attrs{"x": 1.5, "n": int64(3)}, Links: []commitlayer.Subject{"order:o_1"}},
	})
	require.NoError(t, err)
	facts, err := d.TenantFacts(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, facts, 2)
	require.Equal(t, "n1", facts[0].ExternalID, "in time order")
	require.NotZero(t, facts[0].Seq)
	require.Equal(t, commitlayer.Attrs{"x": 1.5, "n": int64(3)}, facts[0].Attrs, "numbers as the store reads them")
	require.Equal(t, []commitlayer.Subject{"order:o_1"}, facts[0].Links)
	require.Equal(t, at.Add(time.Minute), facts[0].OccurredAt)
	none, err := d.TenantFacts(ctx, b.ID)
	require.NoError(t, err)
	require.Empty(t, none)

	act := commitlayer.Action{Contract: "note_anything", Agent: "bot", Subject: "ticket:t_1", RequestedAt: at, Params: commitlayer.Attrs{}}
	main, _, err := d.CreateAction(ctx, a.ID, act, at.Add(time.Minute), at.Add(time.Hour), "benchmark/"+run+"/refund/baseline/main", []byte("h1"))
	require.NoError(t, err)
	act.RequestedAt = at.Add(-time.Minute)
	prior, _, err := d.CreateAction(ctx, a.ID, act, at, at.Add(time.Hour), "", nil)
	require.NoError(t, err)
	acts, err := d.TenantActions(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, acts, 2)
	require.Equal(t, prior.ID, acts[0].ID, "in requested order")
	require.Equal(t, "", acts[0].IdempotencyKey)
	require.Equal(t, main.ID, acts[1].ID)
	require.Equal(t, "note_anything", acts[1].Contract)
	require.Equal(t, "benchmark/"+run+"/refund/baseline/main", acts[1].IdempotencyKey)
}
