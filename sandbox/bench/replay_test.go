package bench_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/worker"
)

// TestReplayRecordedHistories replays the benchmark's histories recorded on
// the dev server (testdata/histories, written by `go test ./cmd/commitlayer
// -run TestRegressionSubsetThroughAdminAPI -record-histories`) against
// today's code, registered as cmd registers it: the product's workflows and
// the benchmark's. Histories recorded while the workflows lived in package
// workflows replay unchanged: their registered names did not move.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories")
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(r)
			bench.Register(r)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, f))
		})
	}
}
