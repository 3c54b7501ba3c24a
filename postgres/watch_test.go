package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

func TestLinkedSubjects(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	at := time.Now().UTC()
	f := func(id, subject string, links ...commitlayer.Subject) commitlayer.Fact {
		return commitlayer.Fact{Source: "s", Type: "t", Subject: commitlayer.Subject(subject), ExternalID: id,
			OccurredAt: at, Attrs: commitlayer.Attrs{}, Links: links}
	}
	_, err := testDB.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		f("1", "subscription:sub_1", "customer:c_1"),
		f("2", "order:o_1", "customer:c_1"),
		f("3", "ticket:t_1", "order:o_1", "customer:c_1"),
		f("4", "order:o_2", "customer:c_2"),
	})
	require.NoError(t, err)
	got, err := testDB.LinkedSubjects(ctx, tn.ID, []commitlayer.Subject{"order:o_1"})
	require.NoError(t, err)
	require.Equal(t, []commitlayer.Subject{"customer:c_1", "ticket:t_1"}, got)
	got, err = testDB.LinkedSubjects(ctx, tn.ID, []commitlayer.Subject{"customer:c_1"})
	require.NoError(t, err)
	require.Equal(t, []commitlayer.Subject{"order:o_1", "subscription:sub_1", "ticket:t_1"}, got)
	got, err = testDB.LinkedSubjects(ctx, tn.ID, []commitlayer.Subject{"order:o_1", "customer:c_1"})
	require.NoError(t, err)
	require.Equal(t, []commitlayer.Subject{"subscription:sub_1", "ticket:t_1"}, got, "the given subjects are left out")
	// Another tenant's links are not this one's.
	other := newTenant(t)
	got, err = testDB.LinkedSubjects(ctx, other.ID, []commitlayer.Subject{"order:o_1"})
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = testDB.LinkedSubjects(ctx, tn.ID, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}
