package repotest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// productPackages are CommitLayer itself: everything a user runs or links
// that is not the sandbox benchmark or the command that wires both.
var productPackages = []string{"./", "./contracts/...", "./postgres/...", "./service/...", "./api/...", "./verify/...",
	"./workflows/...", "./activities/...", "./connectors/...", "./worker/...", "./client/...", "./check/...",
	"./metrics/...", "./llm/...", "./console/...", "./mcpgw/...", "./otlpingest/..."}

// TestProductDoesNotImportTheSandbox: the benchmark plugs into the product
// at cmd/commitlayer, never the reverse. The model providers (llm/...)
// count as product here: they serve the sandbox but import nothing of it.
func TestProductDoesNotImportTheSandbox(t *testing.T) {
	cmd := exec.Command("go", append([]string{"list", "-deps"}, productPackages...)...)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	pkgs := strings.Fields(string(out))
	require.Contains(t, pkgs, "github.com/commitlayer/commitlayer/postgres", "the list names the product's packages")
	var bad []string
	for _, p := range pkgs {
		if strings.HasPrefix(p, "github.com/commitlayer/commitlayer/sandbox") || strings.HasPrefix(p, "github.com/commitlayer/commitlayer/cmd") {
			bad = append(bad, p)
		}
	}
	require.Empty(t, bad, "product packages depend on the sandbox or cmd")
}

// TestProductHasNoBenchmarkStorage: the benchmark's tables and types live in
// the sandbox (sandbox/benchstore); the product's store, migrations and
// domain name none of them.
func TestProductHasNoBenchmarkStorage(t *testing.T) {
	cmd := exec.Command("git", "grep", "--untracked", "-l", "-i", "-E", `benchmark_runs|benchmark_agent_steps|benchmark_run_id|BenchmarkRun\b|BenchmarkRequest`,
		"--", "*.go", "*.sql", ":!sandbox/", ":!cmd/", ":!internal/repotest/", ":!postgres/postgres.go", ":!client/")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		return // git grep found nothing
	}
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.Fields(string(out)), "product files that name the benchmark's storage")
}
