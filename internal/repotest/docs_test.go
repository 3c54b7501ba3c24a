package repotest

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// archRow is one row of docs/architecture.md's package table: the packages
// its first cell names and the packages of this module its last cell says
// they import, both as paths relative to the module ("" is the root).
type archRow struct {
	line    int
	pkgs    []string
	imports []string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// docPath turns a backticked name of the table into a path relative to the
// module: `commitlayer` is the root package.
func docPath(s string) string {
	if s == "commitlayer" {
		return ""
	}
	return strings.TrimSuffix(s, "/")
}

// splitRow splits a markdown table row on the pipes that are not escaped.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, cur.String())
}

// architectureTable reads the table under "## The packages" in
// docs/architecture.md. In its first column every backticked name is a
// package; in its last, every backticked name is a package of this module
// that the row's packages import (outside libraries are named without
// backticks).
func architectureTable(t *testing.T) []archRow {
	t.Helper()
	b, err := os.ReadFile("../../docs/architecture.md")
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	start := slices.Index(lines, "## The packages")
	require.NotEqual(t, -1, start, `docs/architecture.md has no "## The packages" section`)
	var rows []archRow
	inTable := false
	for i := start + 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "## ") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			continue
		}
		if !inTable { // the header row, then the separator row
			inTable = true
			i++
			continue
		}
		cells := splitRow(l)
		require.GreaterOrEqual(t, len(cells), 3, "docs/architecture.md:%d: a package row has at least three cells", i+1)
		r := archRow{line: i + 1}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.pkgs = append(r.pkgs, docPath(m[1]))
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			r.imports = append(r.imports, docPath(m[1]))
		}
		require.NotEmpty(t, r.pkgs, "docs/architecture.md:%d: the first cell names no package in backticks", i+1)
		rows = append(rows, r)
	}
	require.NotEmpty(t, rows, "docs/architecture.md: the package table has no rows")
	return rows
}

// modulePackages maps every package of the module (relative path) to the
// packages of the module its non-test files import.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", out)
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	pkgs := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		p, _ := rel(f[0])
		var imps []string
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				imps = append(imps, r)
			}
		}
		pkgs[p] = imps
	}
	require.Contains(t, pkgs, "postgres", "go list names the module's packages")
	return pkgs
}

func show(p string) string {
	if p == "" {
		return "commitlayer"
	}
	return p
}

// TestArchitectureNamesEveryPackage: every package docs/architecture.md's
// table names exists, and every package at most two directories deep (the
// root, each top-level package, each package of sandbox/, connectors/,
// llm/, internal/, client/ and cmd/) has a row.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	rows := architectureTable(t)
	pkgs := modulePackages(t)
	named := map[string]bool{}
	var missing, unknown []string
	for _, r := range rows {
		for _, p := range append(slices.Clone(r.pkgs), r.imports...) {
			if _, ok := pkgs[p]; !ok {
				unknown = append(unknown, show(p))
			}
		}
		for _, p := range r.pkgs {
			named[p] = true
		}
	}
	for p := range pkgs {
		if strings.Count(p, "/") <= 1 && !named[p] {
			missing = append(missing, show(p))
		}
	}
	slices.Sort(missing)
	require.Empty(t, unknown, "docs/architecture.md's package table names packages that do not exist: %s", strings.Join(unknown, ", "))
	require.Empty(t, missing, "packages docs/architecture.md's package table does not name (add a row): %s", strings.Join(missing, ", "))
}

// TestArchitectureImportsAreTrue: each row's imports cell names exactly the
// packages of this module that the row's packages import (non-test files,
// the row's own packages left out).
func TestArchitectureImportsAreTrue(t *testing.T) {
	rows := architectureTable(t)
	pkgs := modulePackages(t)
	var wrong []string
	for _, r := range rows {
		actual := map[string]bool{}
		for _, p := range r.pkgs {
			for _, imp := range pkgs[p] {
				if !slices.Contains(r.pkgs, imp) {
					actual[imp] = true
				}
			}
		}
		for imp := range actual {
			if !slices.Contains(r.imports, imp) {
				wrong = append(wrong, fmt.Sprintf("docs/architecture.md:%d: %s imports `%s`, which the row does not name", r.line, show(r.pkgs[0]), show(imp)))
			}
		}
		for _, imp := range r.imports {
			if _, exists := pkgs[imp]; exists && !actual[imp] {
				wrong = append(wrong, fmt.Sprintf("docs/architecture.md:%d: the row of %s names `%s`, which it does not import", r.line, show(r.pkgs[0]), show(imp)))
			}
		}
	}
	slices.Sort(wrong)
	require.Empty(t, wrong, "docs/architecture.md's imports column differs from go list:\n%s", strings.Join(wrong, "\n"))
}

// TestDocsStayShort: the README is an introduction that shows the two
// commands, and docs/benchmarks.md holds the current figures, not a log of
// how they were reached (that is in git).
func TestDocsStayShort(t *testing.T) {
	for _, d := range []struct {
		path string
		max  int
	}{{"README.md", 300}, {"docs/benchmarks.md", 400}} {
		b, err := os.ReadFile("../../" + d.path)
		require.NoError(t, err)
		n := strings.Count(string(b), "\n")
		require.LessOrEqual(t, n, d.max, "%s has %d lines; at most %d (reference belongs in docs/, history in git)", d.path, n, d.max)
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	for _, cmd := range []string{"make demo", "make test"} {
		require.Contains(t, string(readme), cmd, "README.md shows the two commands")
	}
}
