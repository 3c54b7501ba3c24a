package harness

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/check"
	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
)

// sameAsCheck gives `commitlayer check`'s engine (check.Verify) what the
// product stored for a row — the action, the prior actions, every fact
// the connectors pulled, the connected and unreachable sources, the time
// of the final verdict — and requires the verdict the product stored:
// status, lenses, every finding with its message, facts and hint,
// unavailable sources, claim.
func sameAsCheck(t *testing.T, sc catalogue.Scenario, run *localRun) {
	t.Helper()
	in := run.in
	cs, err := check.LoadContracts([]string{filepath.Join("..", "contracts", contractFileOf(t, sc.Process))})
	require.NoError(t, err)
	var lines []check.Line[commitlayer.Action]
	for i, p := range in.Prior {
		lines = append(lines, check.Line[commitlayer.Action]{Line: i + 1, Value: p})
	}
	lines = append(lines, check.Line[commitlayer.Action]{Line: len(lines) + 1, Value: in.Action})
	res, err := check.Verify(cs, sc.ID, lines, slices.Clone(in.Facts), check.Options{
		At: in.Now, Connected: in.Coverage.Connected, Unreachable: in.Coverage.Unreachable,
	})
	require.NoError(t, err)
	got := res[len(res)-1].Verdict
	require.Equal(t, in.Action.ID, got.ActionID)
	require.Equal(t, comparableVerdict(run.final), comparableVerdict(got), "check differs from the matrix on %s%s", sc.ID, run.explain())
}

// comparableVerdict keeps what a verdict says.
func comparableVerdict(v commitlayer.Verdict) commitlayer.Verdict {
	v.Version, v.ContractVersion = 0, 0
	v.EvaluatedAt, v.SettlesAt = v.EvaluatedAt.UTC().Truncate(time.Microsecond), v.SettlesAt.UTC().Truncate(time.Microsecond)
	if len(v.UnavailableSources) == 0 {
		v.UnavailableSources = nil
	}
	if len(v.Findings) == 0 {
		v.Findings = nil
	}
	return v
}

// contractFileOf is the file name of a process's contract in
// sandbox/contracts.
func contractFileOf(t *testing.T, process string) string {
	t.Helper()
	for _, p := range business.All() {
		if p.Name == process {
			return p.Contract + ".yaml"
		}
	}
	t.Fatalf("no process %q", process)
	return ""
}
