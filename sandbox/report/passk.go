package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// PassKAll is the name of the overall pass^k line.
const PassKAll = "all"

// PassKOf computes pass^k from a run that repeated its scenarios (rows
// with Attempt set), per workflow in order of appearance and overall
// ("all"), as τ-bench reports it: a scenario counts for the agent when all
// of its k attempts truly succeeded, and for CommitLayer when all k
// verdicts are the same (status and lenses) and each agrees with the
// oracle on both lenses. k is the fewest attempts any scenario had; a
// scenario's first k attempts count. Nil when no row is repeated.
func PassKOf(rows []matrix.Row) []matrix.PassK {
	byID := map[string][]matrix.Row{}
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
	all := matrix.PassK{Process: PassKAll, K: k}
	var lines []matrix.PassK
	line := func(wf string) *matrix.PassK {
		for i := range lines {
			if lines[i].Process == wf {
				return &lines[i]
			}
		}
		lines = append(lines, matrix.PassK{Process: wf, K: k})
		return &lines[len(lines)-1]
	}
	for _, id := range order {
		attempts := byID[id]
		slices.SortStableFunc(attempts, func(a, b matrix.Row) int { return a.Attempt - b.Attempt })
		attempts = attempts[:k]
		agent, consistent := true, true
		for _, a := range attempts {
			agent = agent && a.TrulySucceeded()
			consistent = consistent && a.Agrees() && a.Verdict.Status == attempts[0].Verdict.Status &&
				a.Verdict.Lenses == attempts[0].Verdict.Lenses
		}
		l := line(attempts[0].Process)
		for _, p := range []*matrix.PassK{l, &all} {
			p.Agent.Add(true, agent)
			p.CommitLayer.Add(true, consistent)
		}
	}
	return append(lines, all)
}

// passKMarkdown is the pass^k section of the markdown, when the run
// repeated its scenarios.
func passKMarkdown(b *strings.Builder, ps []matrix.PassK) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## pass^%d\n\nEach scenario ran %d times, each on a fresh enterprise. The agent's pass^k counts the scenarios whose %d attempts all truly succeeded (the oracle's PASS on both lenses), as τ-bench reports it; CommitLayer is consistent on a scenario when its %d verdicts are the same and each agrees with the oracle.\n\n",
		ps[0].K, ps[0].K, ps[0].K, ps[0].K)
	b.WriteString("| workflow | agent pass^k | CommitLayer consistent |\n|---|---|---|\n")
	for _, p := range ps {
		name := p.Process
		if name == PassKAll {
			name = "**all**"
		}
		fmt.Fprintf(b, "| %s | %s (%.0f%%) | %s (%.0f%%) |\n", name, p.Agent, 100*p.Agent.Rate(), p.CommitLayer, 100*p.CommitLayer.Rate())
	}
}

// SummarizeReplay summarizes a replay's rows; nil when none is replayed.
func SummarizeReplay(rows []matrix.Row) *matrix.ReplaySummary {
	var s *matrix.ReplaySummary
	for _, r := range rows {
		if r.Replay == nil {
			continue
		}
		if s == nil {
			s = &matrix.ReplaySummary{Of: r.Replay.Of}
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
func replayMarkdown(b *strings.Builder, s *matrix.ReplaySummary, rows []matrix.Row) {
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
