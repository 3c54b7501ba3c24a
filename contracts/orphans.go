package contracts

import (
	"slices"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Orphan is a fact of a kind the contract expects or forbids that no
// recorded action of the contract accounts for.
type Orphan struct {
	Contract string           `json:"contract_id"`
	Check    string           `json:"check"`
	Fact     commitlayer.Fact `json:"fact"`
}

// Orphans lists, in time order, the facts matching one of c's effects or
// forbids (kind, and `where` with empty params and state, an unevaluable one
// matching; none with `orphans: false`) that no action of c covers: one on
// the fact's subject, a link of it, or a subject one hop away, requested in
// [occurred_at − settlement − watch, occurred_at]. Each names the first check it matches.
func Orphans(c *Contract, actions []commitlayer.Action, facts []commitlayer.Fact) []Orphan {
	type check struct {
		id    string
		kind  commitlayer.FactType
		where *program
	}
	var checks []check
	for _, e := range c.effects {
		if e.spec.ReportsOrphans() {
			checks = append(checks, check{e.spec.ID, e.kind, e.where})
		}
	}
	for _, f := range c.forbids {
		if f.spec.ReportsOrphans() {
			checks = append(checks, check{f.spec.ID, f.kind, f.where})
		}
	}
	byKind := map[commitlayer.FactType][]int{}
	for i, ch := range checks {
		byKind[ch.kind] = append(byKind[ch.kind], i)
	}

	// The facts are judged without any action: empty variables.
	state := map[string]any{}
	for _, s := range c.Spec.Sources {
		state[s] = map[string]any{}
	}
	act := activation{params: emptyMap, action: emptyMap, state: exact.NativeToValue(state)}

	type hit struct {
		fact  int
		check string
	}
	var hits []hit
	subjects := map[commitlayer.Subject]bool{}
	for i := range facts {
		f := &facts[i]
		for _, ci := range byKind[commitlayer.FactType{Source: f.Source, Type: f.Type}] {
			ch := checks[ci]
			if ch.where != nil {
				act.effect = exact.NativeToValue(effectMap(f))
				if ok, err := runBool(ch.where, &act); err == nil && !ok {
					continue
				}
			}
			hits = append(hits, hit{i, ch.id})
			subjects[f.Subject] = true
			break
		}
	}
	out := []Orphan{}
	if len(hits) == 0 {
		return out
	}

	// Subjects linked one hop to a hit's subject, in either direction.
	linked := map[commitlayer.Subject][]commitlayer.Subject{}
	for i := range facts {
		f := &facts[i]
		for _, l := range f.Links {
			if subjects[f.Subject] {
				linked[f.Subject] = append(linked[f.Subject], l)
			}
			if subjects[l] {
				linked[l] = append(linked[l], f.Subject)
			}
		}
	}
	// Requested times of this contract's actions, per subject, sorted.
	times := map[commitlayer.Subject][]time.Time{}
	for i := range actions {
		if a := &actions[i]; a.Contract == c.Spec.ID {
			times[a.Subject] = append(times[a.Subject], a.RequestedAt)
		}
	}
	for s := range times {
		slices.SortFunc(times[s], time.Time.Compare)
	}
	span := c.Settlement() + c.Watch()
	covers := func(s commitlayer.Subject, at time.Time) bool {
		ts := times[s] // any requested_at in [at − span, at]?
		i, _ := slices.BinarySearchFunc(ts, at.Add(-span), time.Time.Compare)
		return i < len(ts) && !ts[i].After(at)
	}
	for _, h := range hits {
		f := &facts[h.fact]
		covered := covers(f.Subject, f.OccurredAt)
		for _, l := range f.Links {
			covered = covered || covers(l, f.OccurredAt)
		}
		for _, l := range linked[f.Subject] {
			covered = covered || covers(l, f.OccurredAt)
		}
		if !covered {
			out = append(out, Orphan{Contract: c.Spec.ID, Check: h.check, Fact: *f})
		}
	}
	slices.SortStableFunc(out, func(a, b Orphan) int { return factCmp(&a.Fact, &b.Fact) })
	return out
}
