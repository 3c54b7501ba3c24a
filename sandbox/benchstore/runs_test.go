package benchstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/benchstore/benchstoretest"
)

func TestBenchmarkRuns(t *testing.T) {
	testDB := benchstoretest.Store(t)
	ctx := context.Background()
	req := json.RawMessage(`{"only": ["refund/"],  "concurrency": 4}`) // spacing kept byte for byte
	r, err := testDB.CreateBenchmarkRun(ctx, benchstore.Run{Status: "running", Request: req, TenantID: "t_x"})
	require.NoError(t, err)
	require.Regexp(t, `^bench_[a-z2-7]{16}$`, r.ID)
	require.Equal(t, req, r.Request)
	require.Nil(t, r.Summary)
	require.False(t, r.StartedAt.IsZero())
	require.True(t, r.FinishedAt.IsZero())

	got, err := testDB.GetBenchmarkRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, r, got)

	r.Status = "done"
	r.Summary = json.RawMessage(`{"zeta":1,"alpha":2}`)
	r.Results = json.RawMessage(`[{"id":"refund/lost_response"}]`)
	r.Markdown = "| a | b |\n"
	r.LogTail = "line 1\nline 2\n"
	r.FinishedAt = r.StartedAt.Add(90 * time.Second)
	require.NoError(t, testDB.UpdateBenchmarkRun(ctx, r))
	got, err = testDB.GetBenchmarkRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, r, got)

	olderID := "bench_older_" + fmt.Sprint(time.Now().UnixNano())
	older, err := testDB.CreateBenchmarkRun(ctx, benchstore.Run{ID: olderID, Status: "done",
		StartedAt: r.StartedAt.Add(-time.Hour)})
	require.NoError(t, err)
	_, err = testDB.CreateBenchmarkRun(ctx, benchstore.Run{ID: olderID, Status: "done"})
	require.ErrorIs(t, err, commitlayer.ErrConflict)

	all, err := testDB.ListBenchmarkRuns(ctx)
	require.NoError(t, err)
	var ids []string
	for _, x := range all {
		ids = append(ids, x.ID)
	}
	require.Less(t, indexOf(ids, r.ID), indexOf(ids, older.ID), "newest first")

	_, err = testDB.GetBenchmarkRun(ctx, "bench_missing")
	require.ErrorIs(t, err, commitlayer.ErrNotFound)
	require.ErrorIs(t, testDB.UpdateBenchmarkRun(ctx, benchstore.Run{ID: "bench_missing", Status: "x"}), commitlayer.ErrNotFound)
}

func TestBenchmarkRunBadInput(t *testing.T) {
	testDB := benchstoretest.Store(t)
	ctx := context.Background()
	for name, r := range map[string]benchstore.Run{
		"no status":        {ID: "bench_bad1"},
		"bad request json": {ID: "bench_bad2", Status: "x", Request: json.RawMessage(`{`)},
		"bad summary json": {ID: "bench_bad3", Status: "x", Summary: json.RawMessage(`nope`)},
		"NUL in markdown":  {ID: "bench_bad4", Status: "x", Markdown: "\x00"},
	} {
		_, err := testDB.CreateBenchmarkRun(ctx, r)
		require.ErrorIs(t, err, commitlayer.ErrInvalid, name)
		_, err = testDB.GetBenchmarkRun(ctx, r.ID)
		require.ErrorIs(t, err, commitlayer.ErrNotFound, name)
	}
	ok, err := testDB.CreateBenchmarkRun(ctx, benchstore.Run{Status: "running"})
	require.NoError(t, err)
	ok.Results = json.RawMessage(`[`)
	require.ErrorIs(t, testDB.UpdateBenchmarkRun(ctx, ok), commitlayer.ErrInvalid)
	ok.Results = nil
	ok.Status = ""
	require.ErrorIs(t, testDB.UpdateBenchmarkRun(ctx, ok), commitlayer.ErrInvalid)
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}
