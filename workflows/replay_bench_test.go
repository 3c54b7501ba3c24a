package workflows_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer/worker"
)

// BenchmarkReplayWatchingVerification is the worker's CPU for a wake of a
// verification that is not in its sticky cache: the SDK replays the whole
// history before it runs the new workflow task. The history is a compact
// verification woken by a signal while it watched (28 events, 22 KB as
// JSON); the server's part of a cache miss (the history sent whole with the
// task) is not in it. docs/benchmarks.md, "Session 6", weighs it against
// the memory a cached verification holds.
func BenchmarkReplayWatchingVerification(b *testing.B) {
	hist, err := client.HistoryFromJSON(mustOpen(b, filepath.Join("testdata", "histories", "verify_lean_reversal.json")), client.HistoryJSONOptions{})
	require.NoError(b, err)
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(r)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.ReplayWorkflowHistory(logger, hist); err != nil {
			b.Fatal(err)
		}
	}
}

func mustOpen(b *testing.B, path string) io.Reader {
	f, err := os.Open(path)
	require.NoError(b, err)
	b.Cleanup(func() { f.Close() })
	return f
}
