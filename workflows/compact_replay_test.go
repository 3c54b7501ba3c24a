package workflows_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer/worker"
)

// TestReplayDetectsACompactHistoryTamperedWith: a compact history whose version
// marker names another change id (as if recorded before the change) must
// not replay: the old path's steps do not match what was recorded.
func TestReplayDetectsACompactHistoryTamperedWith(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "histories", "verify_lean_clean_pass.json"))
	require.NoError(t, err)
	// The change id sits in the marker's details and in the
	// TemporalChangeVersion upsert, base64-encoded JSON; replace both.
	s := string(raw)
	require.Contains(t, s, compactB64, "the recorded history carries the compact-history marker")
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	require.NoError(t, os.WriteFile(tampered, []byte(strings.ReplaceAll(s, compactB64, otherB64)), 0o644))
	r := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(r)
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", "histories", "verify_lean_clean_pass.json")))
	require.Error(t, r.ReplayWorkflowHistoryFromJSONFile(logger, tampered))
}

// The compact-history marker's change id as the history stores it (base64 of the JSON
// string), and another one of the same length.
const (
	compactB64 = "ImxlYW4tdmVyaWZpY2F0aW9uIg==" // "lean-verification"
	otherB64   = "Im1lYW4tdmVyaWZpY2F0aW9uIg==" // "mean-verification"
)
