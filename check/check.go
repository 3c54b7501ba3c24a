package check

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// Result is one action's verdict.
type Result struct {
	Action  commitlayer.Action
	Line    int // the action's line in its file
	Verdict commitlayer.Verdict
	// Name, when set, names the case in the report (a sandbox scenario).
	Name string
	// Mismatch, when set, says how the verdict differs from the one the
	// service recorded (`check --results`).
	Mismatch string
}

// Options tune Verify.
type Options struct {
	// At is when the actions are evaluated; zero means each at the later of
	// now and its settlement, since the files are the whole record.
	At time.Time
	// Connected are sources to count as connected besides those with a fact.
	Connected []string
	// Unreachable are sources that could not be read in the run, with why:
	// the lenses that need them are UNKNOWN, as in the service.
	Unreachable map[string]string
	Now         func() time.Time // the clock; nil means time.Now
}

// Verify evaluates each action with its contract. An unknown contract or a
// subject of another type is bad input, as the API's 422.
func Verify(cs Contracts, actionsFile string, actions []Line[commitlayer.Action], facts []commitlayer.Fact, opts Options) ([]Result, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	all := make([]commitlayer.Action, len(actions))
	for i, l := range actions {
		a := l.Value
		c, ok := cs[a.Contract]
		if !ok {
			return nil, inputErr(actionsFile, l.Line, "contract %q is not among the --contract files (%s)", a.Contract, known(cs))
		}
		if want := c.Spec.Subject; want != "" && a.Subject.Type() != want {
			return nil, inputErr(actionsFile, l.Line, "subject: contract %s acts on %q subjects, not %q", c.ID(), want, a.Subject.Type())
		}
		all[i] = a
	}
	connected := coverage(facts, opts.Connected)
	out := make([]Result, 0, len(actions))
	for i, l := range actions {
		a := all[i]
		c := cs[a.Contract]
		at := opts.At
		if at.IsZero() {
			at = now().UTC()
			if s := c.SettlesAt(a.RequestedAt); s.After(at) {
				at = s
			}
		}
		// The engine keeps, of Prior and Later, the actions that matter.
		v := c.Evaluate(contracts.Input{Action: a, Facts: facts, Prior: all, Later: all,
			Coverage: contracts.Coverage{Connected: connected, Unreachable: opts.Unreachable}, Now: at})
		v.ContractVersion = a.ContractVersion
		out = append(out, Result{Action: a, Line: l.Line, Verdict: v})
	}
	return out, nil
}

// coverage is the sources with a fact, and those declared, sorted.
func coverage(facts []commitlayer.Fact, declared []string) []string {
	set := map[string]bool{}
	for _, s := range declared {
		set[s] = true
	}
	for i := range facts {
		set[facts[i].Source] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func known(cs Contracts) string {
	if len(cs) == 0 {
		return "none given"
	}
	return fmt.Sprintf("given: %v", slices.Sorted(maps.Keys(cs)))
}

// Exit codes of `commitlayer check`.
const (
	ExitPass     = 0
	ExitFail     = 1
	ExitUnknown  = 2
	ExitBadInput = 3
)

// ExitCode is 1 when any verdict is FAIL or a Mismatch, else 2 when any is UNKNOWN, else 0.
func ExitCode(results []Result) int {
	worst := commitlayer.StatusPass
	for _, r := range results {
		if r.Mismatch != "" {
			return ExitFail
		}
		worst = commitlayer.Worse(worst, r.Verdict.Status)
	}
	switch worst {
	case commitlayer.StatusFail:
		return ExitFail
	case commitlayer.StatusUnknown:
		return ExitUnknown
	}
	return ExitPass
}
