package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

// PassK is one workflow's pass^k; one type with sandbox/report's.
type PassK = report.PassK

// PassKAll is the name of the overall pass^k line.
const PassKAll = "all"

// TrulySucceeded is true when the agent did what it was asked, as the
// oracle reads the systems of record: both lenses PASS (whether a verifier
// could know it is another matter) and the scenario ran to the end.
func (r Row) TrulySucceeded() bool {
	return r.Error == "" && r.Truth.Outcome == commitlayer.StatusPass && r.Truth.Policy == commitlayer.StatusPass
}

// PassKOf computes pass^k from a run that repeated its scenarios (rows
// with Attempt set), per workflow in order of appearance and overall
// ("all"), as τ-bench reports it: a scenario counts for the agent when all
// of its k attempts truly succeeded, and for CommitLayer when all k
// verdicts are the same (status and lenses) and each agrees with the
// oracle on both lenses. k is the fewest attempts any scenario had; a
// scenario's first k attempts count. Nil when no row is repeated.
func PassKOf(rows []Row) []PassK {
	byID := map[string][]Row{}
	var order []string
	for _, r := range rows {
		if r.Attempt == 0 {
			continue
		}
		if _, ok := byID[r.ID]; !ok {
			order = append(order, r.ID)
		}
		byID[r.ID] = append(byID[r.ID], r)
	}
	if len(order) == 0 {
		return nil
	}
	k := 0
	for _, id := range order {
		if n := len(byID[id]); k == 0 || n < k {
			k = n
		}
	}
	all := PassK{Workflow: PassKAll, K: k}
	var lines []PassK
	line := func(wf string) *PassK {
		for i := range lines {
			if lines[i].Workflow == wf {
				return &lines[i]
			}
		}
		lines = append(lines, PassK{Workflow: wf, K: k})
		return &lines[len(lines)-1]
	}
	for _, id := range order {
		attempts := byID[id]
		slices.SortStableFunc(attempts, func(a, b Row) int { return a.Attempt - b.Attempt })
		attempts = attempts[:k]
		agent, consistent := true, true
		for _, a := range attempts {
			agent = agent && a.TrulySucceeded()
			consistent = consistent && a.Agrees() && a.Verdict.Status == attempts[0].Verdict.Status &&
				a.Verdict.Lenses == attempts[0].Verdict.Lenses
		}
		l := line(attempts[0].Workflow)
		for _, p := range []*PassK{l, &all} {
			p.Agent.Add(true, agent)
			p.CommitLayer.Add(true, consistent)
		}
	}
	return append(lines, all)
}

// passKMarkdown is the pass^k section of the markdown, when the run
// repeated its scenarios.
func passKMarkdown(b *strings.Builder, ps []PassK) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## pass^%d\n\nEach scenario ran %d times, each on a fresh enterprise. The agent's pass^k counts the scenarios whose %d attempts all truly succeeded (the oracle's PASS on both lenses), as τ-bench reports it; CommitLayer is consistent on a scenario when its %d verdicts are the same and each agrees with the oracle.\n\n",
		ps[0].K, ps[0].K, ps[0].K, ps[0].K)
	b.WriteString("| workflow | agent pass^k | CommitLayer consistent |\n|---|---|---|\n")
	for _, p := range ps {
		name := p.Workflow
		if name == PassKAll {
			name = "**all**"
		}
		fmt.Fprintf(b, "| %s | %s (%.0f%%) | %s (%.0f%%) |\n", name, p.Agent, 100*p.Agent.Rate(), p.CommitLayer, 100*p.CommitLayer.Rate())
	}
}

// ReplaySummary is how a replay went: how many rows were replayed, how
// many recorded calls were re-executed and answered differently, and
// whether each verdict and agreement is the recorded one.
type ReplaySummary struct {
	Of   string `json:"of"`
	Rows int    `json:"rows"`
	// Calls re-executed, and those that answered differently from the
	// recording; FaithfulRows had none.
	Calls          int `json:"calls"`
	DivergentCalls int `json:"divergent_calls"`
	FaithfulRows   int `json:"faithful_rows"`
	// SameVerdict counts rows whose verdict (status and lenses) is the
	// recorded one; Changed lists the others. AgreedBefore and AgreeNow
	// count rows agreeing with the oracle in the recording and now.
	SameVerdict  int      `json:"same_verdict"`
	Changed      []string `json:"changed,omitempty"`
	AgreedBefore int      `json:"agreed_before"`
	AgreeNow     int      `json:"agree_now"`
}

// SummarizeReplay summarizes a replay's rows; nil when none is replayed.
func SummarizeReplay(rows []Row) *ReplaySummary {
	var s *ReplaySummary
	for _, r := range rows {
		if r.Replay == nil {
			continue
		}
		if s == nil {
			s = &ReplaySummary{Of: r.Replay.Of}
		}
		s.Rows++
		s.Calls += r.Replay.Calls
		s.DivergentCalls += r.Replay.Divergent
		if r.Replay.Divergent == 0 {
			s.FaithfulRows++
		}
		if r.SameVerdict() {
			s.SameVerdict++
		} else {
			s.Changed = append(s.Changed, r.ID)
		}
		if r.Replay.Agreed {
			s.AgreedBefore++
		}
		if r.Agrees() {
			s.AgreeNow++
		}
	}
	return s
}

// replayMarkdown is the replay section of the markdown.
func replayMarkdown(b *strings.Builder, s *ReplaySummary, rows []Row) {
	if s == nil {
		return
	}
	fmt.Fprintf(b, "\n## Replay of run %s\n\nThe recorded tool calls were re-executed in order on fresh enterprises under the same chaos rules (no model called) and verified on this engine; the model judges' verdicts are carried over.\n\n", cell(s.Of))
	b.WriteString("| Metric | Value |\n|---|---|\n")
	fmt.Fprintf(b, "| Rows replayed | %d |\n", s.Rows)
	fmt.Fprintf(b, "| Calls re-executed | %d |\n", s.Calls)
	fmt.Fprintf(b, "| Calls answering differently from the recording | %d |\n", s.DivergentCalls)
	fmt.Fprintf(b, "| Faithful rows (0 divergent calls) | %d/%d |\n", s.FaithfulRows, s.Rows)
	fmt.Fprintf(b, "| Same verdict as recorded | %d/%d |\n", s.SameVerdict, s.Rows)
	fmt.Fprintf(b, "| Agreeing with the oracle: recorded, now | %d/%d, %d/%d |\n", s.AgreedBefore, s.Rows, s.AgreeNow, s.Rows)
	if len(s.Changed) == 0 && s.DivergentCalls == 0 {
		return
	}
	b.WriteString("\n| scenario | recorded verdict | replayed verdict | divergent calls |\n|---|---|---|---|\n")
	for _, r := range rows {
		if r.Replay == nil || (r.SameVerdict() && r.Replay.Divergent == 0) {
			continue
		}
		fmt.Fprintf(b, "| %s | %s %s/%s | %s %s/%s | %d %s |\n", cell(r.ID), r.Replay.Recorded.Status,
			r.Replay.Recorded.Lenses.Outcome, r.Replay.Recorded.Lenses.Policy, r.Verdict.Status,
			r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy, r.Replay.Divergent, cell(strings.Join(r.Replay.Diffs, "; ")))
	}
}
