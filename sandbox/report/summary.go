package report

import (
	"slices"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

var lenses = []commitlayer.Lens{commitlayer.LensOutcome, commitlayer.LensPolicy}

// Summarize computes the summary of rows.
func Summarize(rows []matrix.Row) matrix.Summary {
	s := matrix.Summary{Scenarios: len(rows), Disagreements: []string{}}
	workflows, families := map[string]*matrix.Count{}, map[string]*matrix.Count{}
	var wfOrder, famOrder []string
	group := func(m map[string]*matrix.Count, order *[]string, name string) *matrix.Count {
		c, ok := m[name]
		if !ok {
			c = &matrix.Count{}
			m[name] = c
			*order = append(*order, name)
		}
		return c
	}
	var latencies, passLatencies []float64
	for _, r := range rows {
		ok := r.Error == ""
		s.AgreeOutcome.Add(true, ok && r.Agree.Outcome)
		s.AgreePolicy.Add(true, ok && r.Agree.Policy)
		s.AgreeBoth.Add(true, r.Agrees())
		group(workflows, &wfOrder, r.Process).Add(true, r.Agrees())
		group(families, &famOrder, r.Family).Add(true, r.Agrees())
		if !r.Agrees() {
			s.Disagreements = append(s.Disagreements, r.ID)
		}
		if !ok {
			s.Errors++
			continue
		}
		latencies = append(latencies, r.LatencyMS)
		if r.PassLatencyMS > 0 {
			passLatencies = append(passLatencies, r.PassLatencyMS)
		}

		var knownFail, anyFail, falseNeg, anyPass, falsePos, unknowable bool
		detected, reportedUnknown := true, true
		for _, l := range lenses {
			truth, knowable := r.Truth.Lens(l)
			got := r.Verdict.Lenses.Get(l)
			switch truth {
			case commitlayer.StatusFail:
				anyFail = true
				falseNeg = falseNeg || got == commitlayer.StatusPass
				if knowable {
					knownFail = true
					detected = detected && got == commitlayer.StatusFail
				}
			case commitlayer.StatusPass:
				anyPass = true
				falsePos = falsePos || got == commitlayer.StatusFail
			}
			if !knowable {
				unknowable = true
				reportedUnknown = reportedUnknown && got == commitlayer.StatusUnknown
			}
		}
		s.TrueFailures.Add(knownFail, detected)
		s.FalseNegatives.Add(anyFail, falseNeg)
		s.FalsePositives.Add(anyPass, falsePos)
		if r.Truth.Expected(commitlayer.LensOutcome) == commitlayer.StatusPass && r.Truth.Expected(commitlayer.LensPolicy) == commitlayer.StatusPass {
			s.TruePasses++
		}
		s.UnknownWhenUnknowable.Add(unknowable, reportedUnknown)
		s.FalseClaimsCaught.Add(r.Claim == commitlayer.ClaimSuccess && r.Truth.Expected(commitlayer.LensOutcome) == commitlayer.StatusFail,
			r.Verdict.Lenses.Outcome == commitlayer.StatusFail)
		s.DuplicatesDetected.Add(r.Truth.Duplicate, r.HasCode(commitlayer.CodeDuplicateEffect))
		s.CorrectedAtRecheck.Add(!r.AfterSettlement && r.Verdict.ProvisionalStatus != "" && r.Verdict.ProvisionalStatus != r.Verdict.Status,
			r.Agree.Both())
		s.ReversalsCaught.Add(r.AfterSettlement && r.Truth.Expected(commitlayer.LensOutcome) == commitlayer.StatusFail,
			r.HasCode(commitlayer.CodeEffectReversed))
		for _, st := range r.Stray {
			s.OrphansFlagged.Add(true, slices.Contains(r.Orphans, st))
		}
		for _, o := range r.Orphans {
			if !slices.Contains(r.Stray, o) {
				s.OrphanFalseAlarms++
			}
		}
	}
	s.LatencyMeanMS, s.LatencyP99MS, s.LatencyMaxMS = latencyStats(latencies)
	s.PassLatencyMeanMS, s.PassLatencyP99MS, s.PassLatencyMaxMS = latencyStats(passLatencies)
	for _, name := range ordered(wfOrder, business.Names()) {
		s.ByProcess = append(s.ByProcess, matrix.Group{Name: name, Agree: *workflows[name]})
	}
	for _, name := range ordered(famOrder, catalogue.FamilyNames()) {
		s.ByFamily = append(s.ByFamily, matrix.Group{Name: name, Agree: *families[name]})
	}
	if s.ByProcess == nil {
		s.ByProcess = []matrix.Group{}
	}
	if s.ByFamily == nil {
		s.ByFamily = []matrix.Group{}
	}
	s.PassK = PassKOf(rows)
	return s
}

// ordered returns names in the order of known, then the others in the
// order seen.
func ordered(seen, known []string) []string {
	out := make([]string, 0, len(seen))
	for _, k := range known {
		if slices.Contains(seen, k) {
			out = append(out, k)
		}
	}
	for _, n := range seen {
		if !slices.Contains(known, n) {
			out = append(out, n)
		}
	}
	return out
}
