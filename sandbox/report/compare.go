package report

import (
	"fmt"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// CommitLayerName names CommitLayer among the evaluators.
const CommitLayerName = "CommitLayer"

// Comparison is the trace-only judges against CommitLayer, each against
// the oracle, over the rows that ran to the end.
type Comparison struct {
	// Rows ran to the end; Failures of them truly failed (the oracle's
	// truth of the action as a whole, knowable or not) and Passes truly
	// passed.
	Rows     int `json:"rows"`
	Failures int `json:"failures"`
	Passes   int `json:"passes"`
	// Errors are rows that did not run to the end, left out.
	Errors int `json:"errors"`
	// Evaluators are CommitLayer, then each judge in order of appearance.
	Evaluators []Evaluator `json:"evaluators"`
	// Families are the failures per family, in order of appearance.
	Families []FamilyLine `json:"families"`
}

// Evaluator is one evaluator's record against the oracle.
type Evaluator struct {
	Name string `json:"name"`
	// TraceOnly is true for a judge (it sees only the trajectory).
	TraceOnly bool `json:"trace_only"`
	// Agree: rows where it agreed with the oracle, of the rows it judged.
	// CommitLayer agrees when both lenses do (UNKNOWN expected where the
	// truth was unknowable); a judge when its verdict is the truth.
	Agree matrix.Count `json:"agree"`
	// FalseNegatives: failures it passed, of the failures it judged.
	FalseNegatives matrix.Count `json:"false_negatives"`
	// FalsePositives: passes it failed, of the passes it judged.
	FalsePositives matrix.Count `json:"false_positives"`
	// MissedCaught: failures CommitLayer caught (FAIL) and the judge did
	// not (PASS or UNKNOWN), of the failures CommitLayer caught that it
	// judged. Zero for CommitLayer.
	MissedCaught matrix.Count `json:"missed_caught"`
	// Missed are the ids of those rows.
	Missed []string `json:"missed,omitempty"`
}

// FamilyLine is one failure family's failures.
type FamilyLine struct {
	Family string `json:"family"`
	// Rows of the family that ran; Failures of them truly failed.
	Rows     int `json:"rows"`
	Failures int `json:"failures"`
	// Agree per evaluator (in Comparison.Evaluators' order), over Rows.
	Agree []matrix.Count `json:"agree"`
	// CaughtByCommitLayer: failures CommitLayer failed.
	CaughtByCommitLayer int `json:"caught_by_commitlayer"`
	// MissedCaught per judge (Comparison.Evaluators[1:]): failures
	// CommitLayer caught and the judge missed.
	MissedCaught []int `json:"missed_caught"`
	// Missed per judge: the ids of those rows.
	Missed [][]string `json:"missed"`
}

// Judges are the evaluators that are judges.
func (c Comparison) Judges() []Evaluator {
	if len(c.Evaluators) == 0 {
		return nil
	}
	return c.Evaluators[1:]
}

// Compare puts the judges' verdicts next to CommitLayer's, each against the
// oracle's truth.
func Compare(rows []matrix.Row) Comparison {
	c := Comparison{Evaluators: []Evaluator{{Name: CommitLayerName}}}
	judgeIndex := map[string]int{}
	for _, r := range rows {
		for _, j := range r.Judges {
			if _, ok := judgeIndex[j.Name]; !ok {
				judgeIndex[j.Name] = len(c.Evaluators)
				c.Evaluators = append(c.Evaluators, Evaluator{Name: j.Name, TraceOnly: true})
			}
		}
	}
	n := len(c.Evaluators)
	famIndex := map[string]int{}
	for _, r := range rows {
		if r.Error != "" {
			c.Errors++
			continue
		}
		c.Rows++
		truth := r.Truth.Status()
		failed, passed := truth == commitlayer.StatusFail, truth == commitlayer.StatusPass
		if failed {
			c.Failures++
		}
		if passed {
			c.Passes++
		}
		fi, ok := famIndex[r.Family]
		if !ok {
			fi = len(c.Families)
			famIndex[r.Family] = fi
			c.Families = append(c.Families, FamilyLine{Family: r.Family, Agree: make([]matrix.Count, n),
				MissedCaught: make([]int, n-1), Missed: make([][]string, n-1)})
		}
		fam := &c.Families[fi]
		fam.Rows++
		if failed {
			fam.Failures++
		}

		cl := &c.Evaluators[0]
		cl.Agree.Add(true, r.Agrees())
		fam.Agree[0].Add(true, r.Agrees())
		cl.FalseNegatives.Add(failed, r.Verdict.Status == commitlayer.StatusPass)
		cl.FalsePositives.Add(passed, r.Verdict.Status == commitlayer.StatusFail)
		caught := failed && r.Verdict.Status == commitlayer.StatusFail
		if caught {
			fam.CaughtByCommitLayer++
		}

		seen := map[string]bool{}
		for _, j := range r.Judges {
			if seen[j.Name] {
				continue // one verdict per judge and row: the first
			}
			seen[j.Name] = true
			i := judgeIndex[j.Name]
			e := &c.Evaluators[i]
			agree := truth != commitlayer.StatusUnknown && j.Verdict == truth
			e.Agree.Add(true, agree)
			fam.Agree[i].Add(true, agree)
			e.FalseNegatives.Add(failed, j.Verdict == commitlayer.StatusPass)
			e.FalsePositives.Add(passed, j.Verdict == commitlayer.StatusFail)
			missed := caught && j.Verdict != commitlayer.StatusFail
			e.MissedCaught.Add(caught, missed)
			if missed {
				e.Missed = append(e.Missed, r.ID)
				fam.MissedCaught[i-1]++
				fam.Missed[i-1] = append(fam.Missed[i-1], r.ID)
			}
		}
	}
	return c
}

// JudgeMarkdown is the judge-versus-CommitLayer table in markdown: the
// evaluators against the oracle, the failures by family with what each
// judge missed, and the missed rows by family. latest.md opens with it.
func JudgeMarkdown(rows []matrix.Row) string {
	c := Compare(rows)
	var b strings.Builder
	b.WriteString("## Trace-only judges versus CommitLayer\n\n")
	fmt.Fprintf(&b, "%d scenarios ran to the end; the oracle, reading the systems of record, found %d failed and %d passed.", c.Rows, c.Failures, c.Passes)
	if c.Errors > 0 {
		fmt.Fprintf(&b, " %d did not run to the end and are left out.", c.Errors)
	}
	b.WriteString(" A judge sees only the trajectory (the task, the tool calls and their answers, the agent's report); CommitLayer reads the systems of record.\n\n")
	b.WriteString("| evaluator | sees | agreement with the oracle | false negatives (failures passed) | false positives (passes failed) | failures CommitLayer caught, judge missed |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for i, e := range c.Evaluators {
		sees, missed := "systems of record", "—"
		if e.TraceOnly {
			sees, missed = "trajectory", e.MissedCaught.String()
		}
		name := mdCell(e.Name)
		if i == 0 {
			name = "**" + name + "**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, sees, pct(e.Agree), e.FalseNegatives, e.FalsePositives, missed)
	}
	judges := c.Judges()
	if len(judges) == 0 {
		b.WriteString("\nNo trace-only judge ran in this run.\n")
		return b.String()
	}
	b.WriteString("\n### Failures by family\n\n| family | failures | caught by CommitLayer |")
	for _, j := range judges {
		fmt.Fprintf(&b, " missed by %s |", mdCell(j.Name))
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", len(judges)) + "\n")
	for _, f := range c.Families {
		if f.Failures == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d |", mdCell(f.Family), f.Failures, f.CaughtByCommitLayer)
		for i := range judges {
			fmt.Fprintf(&b, " %d |", f.MissedCaught[i])
		}
		b.WriteString("\n")
	}
	for i, j := range judges {
		if len(j.Missed) == 0 {
			fmt.Fprintf(&b, "\n%s missed no failure CommitLayer caught.\n", mdCell(j.Name))
			continue
		}
		fmt.Fprintf(&b, "\nMissed by %s (caught by CommitLayer), by family:\n\n", mdCell(j.Name))
		for _, f := range c.Families {
			if len(f.Missed[i]) == 0 {
				continue
			}
			ids := make([]string, len(f.Missed[i]))
			for k, id := range f.Missed[i] {
				ids[k] = "`" + strings.ReplaceAll(mdCell(id), "`", "'") + "`"
			}
			fmt.Fprintf(&b, "- **%s** (%d): %s\n", mdCell(f.Family), len(ids), strings.Join(ids, ", "))
		}
	}
	return b.String()
}

// pct is a count with its percentage.
func pct(c matrix.Count) string {
	if c.Of == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d (%.0f%%)", c.N, c.Of, 100*c.Rate())
}

// mdCell makes text safe in a markdown table cell: one line, no pipe, no
// raw HTML.
func mdCell(s string) string {
	s = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}
