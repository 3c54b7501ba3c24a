package repotest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxLines is the longest a production (non-test) Go file may be: past it a
// file holds more than one seam.
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

// maxFileBytes is the largest file the repository may track. The biggest on
// purpose are the sandbox's recorded results (~1.5 MB each); a build output
// (a 144 MB binary was once committed from `go build` in cmd/commitlayer)
// is far past it.
const maxFileBytes = 4 << 20

// TestNoTrackedFileIsHuge: every file git would commit (tracked, or new and
// not ignored) is at most maxFileBytes, and none is an executable binary.
func TestNoTrackedFileIsHuge(t *testing.T) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var big, binaries []string
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		path := filepath.Join("../..", f)
		st, err := os.Stat(path)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		if st.Size() > maxFileBytes {
			big = append(big, f)
		}
		if st.Mode().IsRegular() && st.Size() >= 4 {
			head := make([]byte, 4)
			fh, err := os.Open(path)
			require.NoError(t, err)
			_, err = io.ReadFull(fh, head)
			fh.Close()
			require.NoError(t, err)
			if bytes.Equal(head, []byte("\x7fELF")) {
				binaries = append(binaries, f)
			}
		}
	}
	require.Empty(t, big, "files over %d bytes", maxFileBytes)
	require.Empty(t, binaries, "executables (build output belongs in bin/, which is ignored)")
}
