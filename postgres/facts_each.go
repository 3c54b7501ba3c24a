package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

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

// ActionsOnSubjects returns the actions on any of subjects requested at or
// after since, ordered by requested_at then id (PriorActions' order): what
// a caller filtering many actions' later actions in memory reads once.
func (db *DB) ActionsOnSubjects(ctx context.Context, tenantID string, subjects []commitlayer.Subject, since time.Time) ([]commitlayer.Action, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	if err := checkTimes("since", since); err != nil {
		return nil, fmt.Errorf("actions on subjects: %w", classify(err))
	}
	subs := make([]string, len(subjects))
	for i, s := range subjects {
		subs[i] = string(s)
	}
	acts, err := db.queryActions(ctx, `tenant_id = $1 AND subject = ANY($2::text[]) AND requested_at >= $3
		ORDER BY requested_at, id`, tenantID, subs, lowerBound(since))
	if err != nil {
		return nil, fmt.Errorf("actions on subjects: %w", classify(err))
	}
	return acts, nil
}
