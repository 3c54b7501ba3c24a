package contracts

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"cel.dev/cel-go/common/types/ref"

	"github.com/commitlayer/commitlayer"
)

// factIndex holds, by subject in time order, the facts on the roots, on the
// subjects one hop from them and one hop from the first root's `through`
// hubs. It is built in two passes over the input (three with hubs).
type factIndex struct {
	facts     []commitlayer.Fact
	rel       []int32                                       // positions in facts of the facts kept
	vals      []ref.Val                                     // each kept fact's `effect` value, built on first use
	bySubject map[commitlayer.Subject][]int32               // positions in rel, in factCmp order, repeats dropped
	linked    map[commitlayer.Subject][]commitlayer.Subject // each root and hub → its linked subjects, sorted
	hubs      []commitlayer.Subject                         // `through`-typed subjects in the first root's set, sorted
}

// newFactIndex indexes facts around roots; subjects of throughTypes in
// roots[0]'s subject set are hubs.
func newFactIndex(facts []commitlayer.Fact, roots []commitlayer.Subject, throughTypes []string) *factIndex {
	ix := &factIndex{
		facts:     facts,
		bySubject: make(map[commitlayer.Subject][]int32, len(roots)*4),
		linked:    make(map[commitlayer.Subject][]commitlayer.Subject, len(roots)),
	}
	isRoot := make(map[commitlayer.Subject]bool, len(roots))
	for _, r := range roots {
		isRoot[r] = true
	}
	sets := make(map[commitlayer.Subject]map[commitlayer.Subject]bool, len(roots))
	link := func(center, other commitlayer.Subject) {
		if center == other {
			return
		}
		s := sets[center]
		if s == nil {
			s = map[commitlayer.Subject]bool{}
			sets[center] = s
		}
		s[other] = true
	}
	// neighbours links every center to the subjects one hop away, either direction.
	neighbours := func(isCenter map[commitlayer.Subject]bool) {
		for i := range facts {
			f := &facts[i]
			if len(f.Links) == 0 {
				continue
			}
			if isCenter[f.Subject] {
				for _, l := range f.Links {
					link(f.Subject, l)
				}
			}
			for _, l := range f.Links {
				if isCenter[l] {
					link(l, f.Subject)
				}
			}
		}
	}
	// Pass 1: who is linked to a root (one hop only).
	neighbours(isRoot)
	// Pass 1b: the hubs of `through` forbids and who is linked to them.
	if len(throughTypes) > 0 && len(roots) > 0 {
		isHub := map[commitlayer.Subject]bool{}
		if ofType(roots[0], throughTypes) {
			isHub[roots[0]] = true
		}
		for s := range sets[roots[0]] {
			if ofType(s, throughTypes) {
				isHub[s] = true
			}
		}
		fresh := map[commitlayer.Subject]bool{}
		for h := range isHub {
			ix.hubs = append(ix.hubs, h)
			if !isRoot[h] {
				fresh[h] = true
			}
		}
		slices.Sort(ix.hubs)
		if len(fresh) > 0 {
			neighbours(fresh)
		}
	}
	wanted := maps.Clone(isRoot)
	for center, s := range sets {
		list := make([]commitlayer.Subject, 0, len(s))
		for other := range s {
			list = append(list, other)
			wanted[other] = true
		}
		slices.Sort(list)
		ix.linked[center] = list
	}
	// Pass 2: keep the facts on wanted subjects.
	for i := range facts {
		if wanted[facts[i].Subject] {
			ix.bySubject[facts[i].Subject] = append(ix.bySubject[facts[i].Subject], int32(len(ix.rel)))
			ix.rel = append(ix.rel, int32(i))
		}
	}
	ix.vals = make([]ref.Val, len(ix.rel))
	for s, list := range ix.bySubject {
		if !slices.IsSortedFunc(list, ix.cmp) {
			// Stable: of a fact given twice, the first is kept.
			slices.SortStableFunc(list, ix.cmp)
		}
		// Drop the repeats of a fact given twice (as overlapping fetches
		// return it): sorted, they are adjacent.
		ix.bySubject[s] = slices.CompactFunc(list, func(a, b int32) bool {
			return ix.fact(b).ExternalID != "" && ix.cmp(a, b) == 0
		})
	}
	return ix
}

func (ix *factIndex) fact(pos int32) *commitlayer.Fact { return &ix.facts[ix.rel[pos]] }

func (ix *factIndex) cmp(a, b int32) int { return factCmp(ix.fact(a), ix.fact(b)) }

// factCmp orders facts by occurred_at, then seq, then source and external id.
func factCmp(fa, fb *commitlayer.Fact) int {
	if c := fa.OccurredAt.Compare(fb.OccurredAt); c != 0 {
		return c
	}
	if c := cmp.Compare(fa.Seq, fb.Seq); c != 0 {
		return c
	}
	if c := cmp.Compare(fa.Source, fb.Source); c != 0 {
		return c
	}
	return cmp.Compare(fa.ExternalID, fb.ExternalID)
}

// effectVal is a fact's `effect` variable: attrs, _type, _subject, _occurred_at.
func (ix *factIndex) effectVal(pos int32) ref.Val {
	if v := ix.vals[pos]; v != nil {
		return v
	}
	v := exact.NativeToValue(effectMap(ix.fact(pos)))
	ix.vals[pos] = v
	return v
}

func effectMap(f *commitlayer.Fact) map[string]any {
	m := make(map[string]any, len(f.Attrs)+3)
	maps.Copy(m, f.Attrs)
	m["_type"] = f.Type
	m["_subject"] = string(f.Subject)
	m["_occurred_at"] = f.OccurredAt
	return m
}

// subjectSet is one action's subject and those linked to it, with their facts.
type subjectSet struct {
	subjects []commitlayer.Subject            // own subject first, then linked, sorted
	own      []int32                          // facts on the own subject, in time order
	linked   []int32                          // facts on linked subjects, merged in time order
	all      []int32                          // own and linked, merged in time order
	byKind   map[commitlayer.FactType][]int32 // all, grouped by (source, type), in time order
}

func (ix *factIndex) subjectSet(s commitlayer.Subject) *subjectSet {
	ss := &subjectSet{subjects: []commitlayer.Subject{s}, own: ix.bySubject[s]}
	for _, l := range ix.linked[s] {
		ss.subjects = append(ss.subjects, l)
		ss.linked = append(ss.linked, ix.bySubject[l]...)
	}
	if len(ix.linked[s]) > 1 {
		slices.SortFunc(ss.linked, ix.cmp)
	}
	switch {
	case len(ss.linked) == 0:
		ss.all = ss.own
	case len(ss.own) == 0:
		ss.all = ss.linked
	default:
		ss.all = make([]int32, 0, len(ss.own)+len(ss.linked))
		ss.all = append(append(ss.all, ss.own...), ss.linked...)
		slices.SortFunc(ss.all, ix.cmp)
	}
	ss.byKind = make(map[commitlayer.FactType][]int32)
	for _, pos := range ss.all {
		f := ix.fact(pos)
		k := commitlayer.FactType{Source: f.Source, Type: f.Type}
		ss.byKind[k] = append(ss.byKind[k], pos)
	}
	return ss
}

// state folds, per contract source, the attrs of its facts on the subject
// set from before requestedAt: linked subjects first, then the own subject,
// each in time order, later values overriding. Every source has a map.
func (ix *factIndex) state(ss *subjectSet, sources []string, requestedAt time.Time) map[string]any {
	st := make(map[string]any, len(sources))
	per := make(map[string]map[string]any, len(sources))
	for _, s := range sources {
		m := map[string]any{}
		st[s] = m
		per[s] = m
	}
	fold := func(list []int32) {
		for _, pos := range list {
			f := ix.fact(pos)
			if !f.OccurredAt.Before(requestedAt) {
				break // in time order: the rest are later
			}
			if m, ok := per[f.Source]; ok {
				maps.Copy(m, f.Attrs)
			}
		}
	}
	fold(ss.linked)
	fold(ss.own)
	return st
}
