package catalogue

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
)

func TestCatalogue(t *testing.T) {
	all := Catalogue()
	outages := 0
	for _, p := range business.All() {
		outages += len(p.Needs.All()) - 1 // every source but the main write's
	}
	require.Equal(t, 9, outages)
	require.Len(t, all, 8*11+outages+32)
	require.Len(t, Injections, 11)
	injections := injectionIDs()

	ids := map[string]bool{}
	perWorkflow := map[string]int{}
	generic := map[string]int{}
	families := map[string]bool{}
	for _, sc := range all {
		require.False(t, ids[sc.ID], "duplicate id %s", sc.ID)
		ids[sc.ID] = true
		require.Equal(t, sc.Process+"/"+sc.Injection, sc.ID)
		require.Regexp(t, `^[a-z]+/[a-z0-9_]+$`, sc.ID)
		require.NotEmpty(t, sc.Summary, sc.ID)
		require.True(t, slices.Contains(FamilyNames(), sc.Family), "%s: unknown family %q", sc.ID, sc.Family)
		families[sc.Family] = true
		require.Equal(t, sc.Process, sc.Task.Process, sc.ID)
		require.NoError(t, sc.Task.Validate(), sc.ID)
		require.Equal(t, DefaultAgent, sc.Task.AgentID, sc.ID)
		for _, p := range sc.Prior {
			require.NoError(t, p.Validate(), sc.ID)
			require.Equal(t, sc.Task.AgentID, p.AgentID, "%s: prior runs are by the same agent", sc.ID)
			require.Equal(t, sc.Process, p.Process, sc.ID)
		}
		perWorkflow[sc.Process]++
		if slices.Contains(injections, sc.Injection) {
			generic[sc.Injection]++
		}
		_, ok := business.Lookup(sc.Process)
		require.True(t, ok, sc.ID)
	}
	for _, inj := range injections {
		require.Equal(t, 8, generic[inj], "injection %s is not on all eight processes", inj)
	}
	specific := 0
	for _, wf := range business.All() {
		require.GreaterOrEqual(t, perWorkflow[wf.Name], 11, wf.Name)
		specific += perWorkflow[wf.Name] - 11 - len(SourceOutages(wf))
	}
	require.Equal(t, len(Cases), specific)
	require.Len(t, Cases, 32)
	require.Len(t, perWorkflow, 8)
	for _, f := range Families {
		require.True(t, families[f.Name], "family %s has no scenario", f.Name)
		require.NotEmpty(t, f.About)
	}

	// Catalogue order: workflow by workflow, generic injections first.
	require.Equal(t, "refund/baseline", all[0].ID)
	require.Equal(t, "refund/no_calls_claims_success", all[10].ID)
	require.Equal(t, "trade", all[len(all)-1].Process)
}

func TestCatalogueReturnsFreshValues(t *testing.T) {
	a := Catalogue()
	a[0].Task.Params["amount"] = int64(1)
	a[0].ID = "changed"
	b := Catalogue()
	require.Equal(t, "refund/baseline", b[0].ID)
	require.Equal(t, int64(2500), b[0].Task.Params["amount"])
	// Tasks derived from the same base do not share params either.
	sc, ok := Lookup("refund/over_limit")
	require.True(t, ok)
	require.Equal(t, int64(60000), sc.Task.Params["amount"])
	require.Equal(t, "t_7", sc.Task.Params["ticket_id"])
	require.Equal(t, int64(2500), b[0].Task.Params["amount"])
}

func TestLookup(t *testing.T) {
	sc, ok := Lookup("payout/returned_after_settlement")
	require.True(t, ok)
	require.Equal(t, "reversal", sc.Family)
	require.NotNil(t, sc.AfterSettlement)
	for _, id := range []string{"", "payout", "payout/", "PAYOUT/baseline", "payout/baseline ", "nope/baseline", "payout/nope"} {
		_, ok := Lookup(id)
		require.False(t, ok, "%q", id)
	}
}

func TestSelect(t *testing.T) {
	all := scenarioIDs(Catalogue())
	cases := []struct {
		name string
		only []string
		want func() []string
		err  []string // substrings of the error
	}{
		{name: "nil selects everything", only: nil, want: func() []string { return all }},
		{name: "empty selects everything", only: []string{}, want: func() []string { return all }},
		{name: "one id", only: []string{"close/stale_read"}, want: func() []string { return []string{"close/stale_read"} }},
		{name: "a prefix", only: []string{"close/"}, want: func() []string {
			var out []string
			for _, id := range all {
				if strings.HasPrefix(id, "close/") {
					out = append(out, id)
				}
			}
			return out
		}},
		{name: "catalogue order kept, duplicates removed", only: []string{"trade/baseline", "refund/baseline", "trade/baseline", "refund/"},
			want: func() []string {
				var out []string
				for _, id := range all {
					if strings.HasPrefix(id, "refund/") || id == "trade/baseline" {
						out = append(out, id)
					}
				}
				return out
			}},
		{name: "surrounding spaces are trimmed", only: []string{" deploy/baseline "}, want: func() []string { return []string{"deploy/baseline"} }},
		{name: "unknown id", only: []string{"refund/baseline", "refund/nope"}, err: []string{`"refund/nope"`}},
		{name: "every unknown entry is named", only: []string{"x", "payout/nope", "payout/"}, err: []string{`"x"`, `"payout/nope"`}},
		{name: "a workflow without the slash is not a prefix", only: []string{"refund"}, err: []string{`"refund"`}},
		{name: "a partial id is not a prefix", only: []string{"refund/base"}, err: []string{`"refund/base"`}},
		{name: "an empty entry matches nothing", only: []string{""}, err: []string{`""`}},
		{name: "a lone slash matches nothing", only: []string{"/"}, err: []string{`"/"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Select(tc.only)
			if tc.err != nil {
				require.Error(t, err)
				require.Nil(t, got)
				for _, s := range tc.err {
					require.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want(), scenarioIDs(got))
		})
	}
}

func FuzzSelect(f *testing.F) {
	for _, s := range []string{"refund/", "refund/baseline", "", "/", "x/y/z", "trade/halted_product\x00"} {
		f.Add(s, "close/")
	}
	all := scenarioIDs(Catalogue())
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := Select([]string{a, b})
		if err != nil {
			require.Nil(t, got)
			return
		}
		ids := scenarioIDs(got)
		require.NotEmpty(t, ids)
		// A subsequence of the catalogue, each id once.
		i := 0
		for _, id := range ids {
			for i < len(all) && all[i] != id {
				i++
			}
			require.Less(t, i, len(all), "%q is not in catalogue order", id)
			i++
		}
	})
}

func TestRegressionSubset(t *testing.T) {
	ids := Regression
	require.GreaterOrEqual(t, len(ids), 14)
	scs, err := Select(ids)
	require.NoError(t, err)
	require.Len(t, scs, len(ids), "no duplicates")
	workflows, families := map[string]bool{}, map[string]bool{}
	for _, sc := range scs {
		workflows[sc.Process] = true
		families[sc.Family] = true
	}
	for _, wf := range business.All() {
		require.True(t, workflows[wf.Name], "workflow %s missing", wf.Name)
	}
	for _, f := range Families {
		require.True(t, families[f.Name], "family %s missing", f.Name)
	}
}

// The generic injections are a table: each row has an id, a known family
// and a summary, and its faults aim at the main write of every process.
func TestInjectionTable(t *testing.T) {
	seen := map[string]bool{}
	for _, inj := range Injections {
		require.False(t, seen[inj.ID], inj.ID)
		seen[inj.ID] = true
		require.Contains(t, FamilyNames(), inj.Family, inj.ID)
		require.NotEmpty(t, inj.Summary, inj.ID)
		for _, p := range business.All() {
			sc := inj.Scenario(p)
			require.NotContains(t, sc.Summary, "{", "%s: placeholder left", sc.ID)
			for _, f := range []struct {
				fault *Fault
				rules func(*Env) []chaos.Rule
			}{{inj.Agent, sc.AgentChaos}, {inj.Extract, sc.ExtractChaos}} {
				if f.fault == nil {
					require.Nil(t, f.rules, sc.ID)
					continue
				}
				rs := f.rules(&Env{})
				require.Len(t, rs, 1, sc.ID)
				require.Equal(t, p.Write.System, rs[0].System, sc.ID)
				if f.fault.WholeSystem {
					require.Empty(t, rs[0].Route, sc.ID)
				} else {
					require.Equal(t, p.Write.Route, rs[0].Route, sc.ID)
				}
			}
		}
	}
}

// Every case is on a known process, with a known family, once.
func TestCaseTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Cases {
		id := c.Process + "/" + c.Injection
		require.False(t, seen[id], id)
		seen[id] = true
		_, ok := business.Lookup(c.Process)
		require.True(t, ok, id)
		require.Contains(t, FamilyNames(), c.Family, id)
		require.NotContains(t, injectionIDs(), c.Injection, "%s: a case is not a generic injection", id)
		require.NotEmpty(t, c.Summary, id)
		require.NotNil(t, c.Edit, id)
	}
}

// TestSplitForModelSkipsScriptedBehaviours: the scenarios that script one
// agent behaviour (no calls, another record, other values) are the ones
// skipped, each with its reason; every other one applies.
func TestSplitForModelSkipsScriptedBehaviours(t *testing.T) {
	all := Catalogue()
	run, skipped := SplitForModel(all)
	require.Equal(t, len(all), len(run)+len(skipped))
	require.Len(t, skipped, 12, "8 no-call scenarios, 2 wrong subjects, 2 overridden params")
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.ID] = s.Reason
	}
	require.Contains(t, reasons["refund/no_calls_claims_success"], "makes no call")
	require.Contains(t, reasons["refund/wrong_customer"], "o_1007")
	require.Contains(t, reasons["payout/amount_mismatch"], "amount")
	require.Contains(t, reasons["deploy/wrong_environment"], "environment")
	for _, sc := range run {
		require.Empty(t, SkipForModel(sc), sc.ID)
	}
}

// injectionIDs lists the generic injections' ids, in catalogue order.
func injectionIDs() []string {
	out := make([]string, len(Injections))
	for i, inj := range Injections {
		out[i] = inj.ID
	}
	return out
}

// scenarioIDs lists the ids of scenarios.
func scenarioIDs(scs []Scenario) []string {
	out := make([]string, len(scs))
	for i, sc := range scs {
		out[i] = sc.ID
	}
	return out
}
