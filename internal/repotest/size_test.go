package repotest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxLines is the longest a production (non-test) Go file may be: past it a
// file holds more than one seam (../../README.md, "Package map").
const maxLines = 600

// TestNoProductionFileIsTooLong: every tracked non-test Go file of the
// repository, product and sandbox alike, has at most maxLines lines.
func TestNoProductionFileIsTooLong(t *testing.T) {
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.go", ":!*_test.go")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	files := strings.Fields(string(out))
	require.NotEmpty(t, files)
	var long []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		require.NoError(t, err)
		if bytes.Count(b, []byte("\n")) > maxLines {
			long = append(long, f)
		}
	}
	require.Empty(t, long, "production files over %d lines", maxLines)
}
