package postgres

import (
	"context"
	"slices"

	"github.com/commitlayer/commitlayer"
)

// FactsAboutEach returns, for each of subjects, what FactsAbout returns for
// that subject alone, read in one query: the facts about all of them, then
// split per subject in memory by FactsAbout's own rule (the facts on the
// subject or linking it; those, plus the facts on every subject one of
// them names). A caller that needs the facts of many subjects one by one
// (a screen of the watching verifications a batch reaches) asks once.
func (db *DB) FactsAboutEach(ctx context.Context, tenantID string, subjects []commitlayer.Subject) (map[commitlayer.Subject][]commitlayer.Fact, error) {
	all, err := db.FactsAbout(ctx, tenantID, subjects)
	if err != nil {
		return nil, err
	}
	return splitFactsAbout(all, subjects), nil
}

// splitFactsAbout splits FactsAbout(subjects) into FactsAbout of each
// subject. Every fact of FactsAbout([s]) is in FactsAbout(subjects) (the
// query is a union over its subjects), so filtering the whole by the rule
// for s alone gives exactly FactsAbout([s]), in the same order.
func splitFactsAbout(all []commitlayer.Fact, subjects []commitlayer.Subject) map[commitlayer.Subject][]commitlayer.Fact {
	bySubject := map[commitlayer.Subject][]int{}
	byLink := map[commitlayer.Subject][]int{}
	for i, f := range all {
		bySubject[f.Subject] = append(bySubject[f.Subject], i)
		for _, l := range f.Links {
			if n := byLink[l]; len(n) == 0 || n[len(n)-1] != i { // a link named twice counts once
				byLink[l] = append(n, i)
			}
		}
	}
	out := make(map[commitlayer.Subject][]commitlayer.Fact, len(subjects))
	for _, s := range subjects {
		if _, done := out[s]; done {
			continue
		}
		// d: the facts on s or linking it; reach: s and every subject d names.
		reach := map[commitlayer.Subject]bool{s: true}
		name := func(i int) {
			reach[all[i].Subject] = true
			for _, l := range all[i].Links {
				reach[l] = true
			}
		}
		for _, i := range bySubject[s] {
			name(i)
		}
		for _, i := range byLink[s] {
			name(i)
		}
		// The facts on any subject reached (the facts linking s are on
		// one: theirs is in reach).
		var pick []int
		for r := range reach {
			pick = append(pick, bySubject[r]...)
		}
		slices.Sort(pick)
		pick = slices.Compact(pick)
		facts := make([]commitlayer.Fact, len(pick))
		for j, i := range pick {
			facts[j] = all[i]
		}
		out[s] = facts
	}
	return out
}
