package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/commitlayer/commitlayer"

// productPackages are every package of the module that is not the sandbox
// (its benchmark, CLI, load test) or the command that wires both: what a
// user runs or links. None is exempt, the client included.
func productPackages(t *testing.T) []string {
	t.Helper()
	out := goList(t, "./...")
	var pkgs []string
	for _, p := range out {
		if !strings.HasPrefix(p, module+"/sandbox") && !strings.HasPrefix(p, module+"/cmd/") {
			pkgs = append(pkgs, p)
		}
	}
	require.Contains(t, pkgs, module+"/client", "the list names the product's packages")
	require.Contains(t, pkgs, module+"/postgres")
	return pkgs
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.Fields(string(out))
}

// TestProductDoesNotImportTheSandbox: the sandbox (its benchmark, matrix
// CLI, load test and check bundle) plugs into the product at
// cmd/commitlayer, never the reverse: no product package has a sandbox or
// cmd package among its dependencies. The model providers (llm/...) are
// product here: they serve the sandbox but import nothing of it.
func TestProductDoesNotImportTheSandbox(t *testing.T) {
	// One line per product package: the package, then its dependencies.
	out := goList(t, append([]string{"-f", "{{.ImportPath}}:{{range .Deps}} {{.}}{{end}};"}, productPackages(t)...)...)
	var bad []string
	pkg := ""
	for _, w := range out {
		if p, ok := strings.CutSuffix(w, ":"); ok {
			pkg = p
			continue
		}
		d := strings.TrimSuffix(w, ";")
		if strings.HasPrefix(d, module+"/sandbox") || strings.HasPrefix(d, module+"/cmd") {
			bad = append(bad, pkg+" → "+d)
		}
	}
	require.Empty(t, bad, "product packages that depend on the sandbox or cmd")
}

// TestClientImportsNoServerPackage: client/ and client/webhook are for
// users' programs; of this module they use only the root (domain types).
func TestClientImportsNoServerPackage(t *testing.T) {
	var bad []string
	for _, p := range goList(t, "-deps", "./client", "./client/webhook") {
		switch {
		case !strings.HasPrefix(p, module):
		case p == module, strings.HasPrefix(p, module+"/client"):
		default:
			bad = append(bad, p)
		}
	}
	require.Empty(t, bad, "the client depends on server packages")
}

// TestClientHasNoBenchmark: the benchmark's admin API has its own client
// in the sandbox (sandbox/benchapi); the product's client names no
// benchmark type, call or field. Only Go benchmark functions of its tests
// (func BenchmarkX(b *testing.B)) may carry the word.
func TestClientHasNoBenchmark(t *testing.T) {
	var bad []string
	err := filepath.WalkDir("../../client", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		allowed := map[*ast.Ident]bool{}
		if strings.HasSuffix(path, "_test.go") {
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && isGoBenchmark(fn) {
					allowed[fn.Name] = true
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && strings.Contains(strings.ToLower(id.Name), "benchmark") && !allowed[id] {
				bad = append(bad, fset.Position(id.Pos()).String()+": "+id.Name)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, bad, "benchmark identifiers in the product's client")
}

// isGoBenchmark reports whether fn is func BenchmarkX(b *testing.B).
func isGoBenchmark(fn *ast.FuncDecl) bool {
	params := fn.Type.Params.List
	if !strings.HasPrefix(fn.Name.Name, "Benchmark") || len(params) != 1 || len(params[0].Names) > 1 {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "B" && isIdent(sel.X, "testing")
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// TestProductHasNoBenchmarkStorage: the benchmark's tables and types live in
// the sandbox (sandbox/benchstore); the product's store, migrations,
// client and domain name none of them.
func TestProductHasNoBenchmarkStorage(t *testing.T) {
	cmd := exec.Command("git", "grep", "--untracked", "-l", "-i", "-E", `benchmark_runs|benchmark_agent_steps|benchmark_run_id|BenchmarkRun\b|BenchmarkRequest`,
		"--", "*.go", "*.sql", ":!sandbox/", ":!cmd/", ":!internal/repotest/", ":!postgres/postgres.go")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		return // git grep found nothing
	}
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.Fields(string(out)), "product files that name the benchmark's storage")
}
