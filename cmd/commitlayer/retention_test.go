package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/postgres"
)

func TestFactRetentionFromEnv(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "0": 0, "2160h": 2160 * time.Hour} {
		t.Setenv(envFactRetention, v)
		c, err := configFromEnv(Roles{})
		require.NoError(t, err, v)
		require.Equal(t, want, c.FactRetention, v)
	}
	for _, bad := range []string{"10m", "forever", "-5h"} {
		t.Setenv(envFactRetention, bad)
		_, err := configFromEnv(Roles{})
		require.ErrorContains(t, err, envFactRetention, bad)
	}
}

func TestPurgeFactsCommand(t *testing.T) {
	url := testenv.Postgres(t)
	t.Setenv("DATABASE_URL", url)
	ctx := context.Background()
	db, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Migrate(ctx))
	tn, _, err := db.CreateTenant(ctx, "purge-cmd")
	require.NoError(t, err)
	old := time.Now().Add(-400 * 24 * time.Hour).UTC().Truncate(time.Second)
	_, err = db.InsertFacts(ctx, tn.ID, []commitlayer.Fact{
		{Source: "ledger", Type: "entry", Subject: "account:a1", ExternalID: "old", OccurredAt: old},
		{Source: "ledger", Type: "entry", Subject: "account:a1", ExternalID: "new", OccurredAt: time.Now().UTC().Add(-time.Hour)},
	})
	require.NoError(t, err)

	code, _, stderr := runCLI(t, "purge-facts")
	require.Equal(t, 2, code, stderr)
	code, _, stderr = runCLI(t, "purge-facts", "-retention", "5m")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "at least 1h")
	code, stdout, stderr := runCLI(t, "purge-facts", "-retention", "8760h")
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "purged")
	_, err = db.FactsByExternalID(ctx, tn.ID, "ledger", "old")
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
	_, err = db.FactsByExternalID(ctx, tn.ID, "ledger", "new")
	require.NoError(t, err)
}
