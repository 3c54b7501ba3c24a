package repotest

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeResultsAreLatest: the README's results block is the headline of
// sandbox/results/latest.md, as `make readme-results` copies it; a run that
// changed latest.md without refreshing the README fails here.
func TestReadmeResultsAreLatest(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	latest, err := os.ReadFile("../../sandbox/results/latest.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)<!-- results:start[^>]*-->\n(.*?)\n<!-- results:end -->`).FindSubmatch(readme)
	require.NotNil(t, m, "README.md has no results block")
	block := string(m[1])
	require.Contains(t, block, "Commit `", "the block has the run line")
	require.Contains(t, block, "| Errors |", "and the summary table")
	require.Contains(t, string(latest), block, "README.md's results differ from sandbox/results/latest.md: run make readme-results")
}
