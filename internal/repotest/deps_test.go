package repotest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProductDoesNotImportTheSandbox: the benchmark plugs into the product
// at cmd/commitlayer, never the reverse.
func TestProductDoesNotImportTheSandbox(t *testing.T) {
	product := []string{"./", "./workflows", "./activities", "./api", "./worker", "./postgres", "./contracts",
		"./service", "./verify", "./connectors/...", "./metrics", "./console"}
	cmd := exec.Command("go", append([]string{"list", "-deps"}, product...)...)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/commitlayer/commitlayer/sandbox") || strings.HasPrefix(p, "github.com/commitlayer/commitlayer/cmd") {
			bad = append(bad, p)
		}
	}
	require.Empty(t, bad, "product packages depend on the sandbox or cmd")
}
