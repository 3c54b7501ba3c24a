package workflows_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer/worker"
)

// TestReplayRecordedHistories replays histories recorded on the dev server
// (testdata/histories, written by `go test ./cmd/commitlayer -run
// TestVerifyLifecycleOnDevServer -record-histories`) against today's
// workflow code: a change that would break running workflows fails here.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories")
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(r)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, f))
		})
	}
}

// TestReplayDetectsNonDeterminism makes sure the replayer would notice: a
// history whose recorded step does not match the code fails.
func TestReplayDetectsNonDeterminism(t *testing.T) {
	// The v0 history schedules Extract as a (remote) activity.
	raw, err := os.ReadFile(filepath.Join("testdata", "histories", "verify_lifecycle_v0_remote_activities.json"))
	require.NoError(t, err)
	// Rename the first activity the history scheduled: Extract → Evaluate.
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	require.NoError(t, os.WriteFile(tampered, []byte(extractName.ReplaceAllStringFunc(string(raw), firstOnly(`"name": "Evaluate"`))), 0o644))
	r := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(r)
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Error(t, r.ReplayWorkflowHistoryFromJSONFile(logger, tampered))
}

var extractName = regexp.MustCompile(`"name":\s*"Extract"`)

// firstOnly replaces the first match with repl and leaves the others.
func firstOnly(repl string) func(string) string {
	done := false
	return func(m string) string {
		if done {
			return m
		}
		done = true
		return repl
	}
}
