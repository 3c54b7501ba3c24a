package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// envName is the form of the environment variables CommitLayer reads: its
// own, the standard ones it follows, and those of the services it calls.
var envName = regexp.MustCompile(`^(COMMITLAYER|DATABASE|TEMPORAL|ANTHROPIC|OPENAI|GEMINI|GOOGLE|STRIPE|BRAINTRUST|LANGSMITH)_[A-Z0-9_]*[A-Z0-9]$`)

// The configuration tables: the product's, and the sandbox's (its role,
// the model providers, the payments backends, the sinks).
const (
	productDoc = "docs/configuration.md"
	sandboxDoc = "sandbox/README.md"
)

// TestConfigurationTablesMatchTheCode: every environment variable the code
// reads (a string literal of that form in a non-test Go file; the test
// harness's own, internal/testenv, aside) is in one of the two tables, and
// every variable the tables name is read by the code or by the Temporal
// SDK's envconfig. The sandbox's variables — those read only under
// sandbox/ or llm/, or naming the benchmark or the sandbox — are in its
// table, the others in the product's.
func TestConfigurationTablesMatchTheCode(t *testing.T) {
	read := readVariables(t)
	require.Contains(t, read, "COMMITLAYER_ADMIN_KEY", "the scan finds the code's variables")
	sdk := envconfigVariables(t)
	require.Contains(t, sdk, "TEMPORAL_ADDRESS", "the scan finds the SDK's variables")
	docs := map[string][]string{productDoc: tableVariables(t, productDoc), sandboxDoc: tableVariables(t, sandboxDoc)}
	inDoc := map[string]string{}
	for doc, names := range docs {
		for _, n := range names {
			require.Empty(t, inDoc[n], "%s is in both %s and %s", n, inDoc[n], doc)
			inDoc[n] = doc
		}
	}
	for name, files := range read {
		want := productDoc
		if sandboxOnly(name, files) {
			want = sandboxDoc
		}
		require.Equal(t, want, inDoc[name], "%s (read in %v) belongs in the table of %s", name, files, want)
	}
	for name, doc := range inDoc {
		_, byCode := read[name]
		require.True(t, byCode || sdk[name], "%s names %s, which no code reads", doc, name)
	}
}

// sandboxOnly reports whether a variable is the sandbox's: read only by
// sandbox/ and llm/ code, or naming the benchmark or the sandbox.
func sandboxOnly(name string, files []string) bool {
	if strings.Contains(name, "BENCHMARK") || strings.Contains(name, "SANDBOX") {
		return true
	}
	for _, f := range files {
		if !strings.HasPrefix(f, "sandbox/") && !strings.HasPrefix(f, "llm/") {
			return false
		}
	}
	return true
}

// readVariables are the variable names in string literals of the
// repository's tracked non-test Go files, with the files naming each.
func readVariables(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.go", ":!*_test.go", ":!internal/testenv/")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	read := map[string][]string{}
	for _, f := range strings.Fields(string(out)) {
		src, err := os.ReadFile(filepath.Join("../..", f))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		collectNames(t, f, src, func(name string) {
			if !slices.Contains(read[name], f) {
				read[name] = append(read[name], f)
			}
		})
	}
	return read
}

// envconfigVariables are the variable names the Temporal SDK's envconfig
// package reads (TEMPORAL_ADDRESS, TEMPORAL_TLS_…).
func envconfigVariables(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "go.temporal.io/sdk/contrib/envconfig")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "*.go"))
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		collectNames(t, f, src, func(name string) { names[name] = true })
	}
	return names
}

func collectNames(t *testing.T, file string, src []byte, add func(string)) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
	require.NoError(t, err, file)
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(s) {
				add(s)
			}
		}
		return true
	})
}

// tableVariables are the variables a document's tables name: the
// back-quoted names in the first cell of each row.
func tableVariables(t *testing.T, doc string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", doc))
	require.NoError(t, err)
	quoted := regexp.MustCompile("`([A-Z0-9_]+)`")
	var names []string
	for line := range strings.SplitSeq(string(b), "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			continue
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
			if envName.MatchString(m[1]) {
				names = append(names, m[1])
			}
		}
	}
	require.NotEmpty(t, names, "%s has a table of variables", doc)
	return names
}
