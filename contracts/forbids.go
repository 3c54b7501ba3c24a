package contracts

import (
	"fmt"
	"slices"
	"strings"

	"github.com/commitlayer/commitlayer"
)

func (ev *evaluation) checkForbid(x *actionCtx, f *forbid) {
	candidates := x.ss.byKind[f.kind]
	var via map[int32]commitlayer.Subject // fact reached through a hub → the hub
	if f.through != "" {
		candidates, via = ev.throughCandidates(x, f)
	}
	var hits []int32
	for _, pos := range candidates {
		if !x.inWindow(ev.ix.fact(pos).OccurredAt) {
			continue
		}
		if f.where != nil {
			x.act.effect = ev.ix.effectVal(pos)
			if ok, err := runBool(f.where, &x.act); err != nil || !ok {
				continue
			}
		}
		hits = append(hits, pos)
	}
	x.act.effect = nil
	switch {
	case len(hits) > 0:
		what := f.kind.Source + " " + f.kind.Type
		if f.where != nil {
			what += " where " + oneLine(f.spec.Where)
		}
		ev.add(commitlayer.CodeForbiddenEffect, f.spec.ID, commitlayer.LensPolicy, f.order, hits,
			"%d forbidden %s %s after the action%s", len(hits), what, plural(len(hits), "fact", "facts"), ev.viaText(hits, via))
	default:
		// Nothing forbidden seen holds only if every source it depends on
		// was read: its own, and those that link the hub.
		if missing := ev.unavailable(append([]string{f.kind.Source}, f.spec.LinksFrom...)...); len(missing) > 0 {
			ev.addUnavailable(f.spec.ID, commitlayer.LensPolicy, f.order, missing)
		}
	}
}

// throughCandidates returns forbid f's candidates for action x in time
// order: facts of its kind on x's subject set and one hop from its hubs;
// via maps each of the latter to the first hub it was reached through.
func (ev *evaluation) throughCandidates(x *actionCtx, f *forbid) ([]int32, map[int32]commitlayer.Subject) {
	own := x.ss.byKind[f.kind]
	inSet := make(map[commitlayer.Subject]bool, len(x.ss.subjects))
	for _, s := range x.ss.subjects {
		inSet[s] = true
	}
	var via map[int32]commitlayer.Subject
	var extra []int32
	types := []string{f.through}
	for _, hub := range ev.ix.hubs {
		if !ofType(hub, types) || !inSet[hub] {
			continue
		}
		for _, n := range ev.ix.linked[hub] {
			if inSet[n] {
				continue // already in the subject set
			}
			for _, pos := range ev.ix.bySubject[n] {
				if fa := ev.ix.fact(pos); fa.Source != f.kind.Source || fa.Type != f.kind.Type {
					continue
				}
				if _, dup := via[pos]; dup {
					continue
				}
				if via == nil {
					via = map[int32]commitlayer.Subject{}
				}
				via[pos] = hub
				extra = append(extra, pos)
			}
		}
	}
	if len(extra) == 0 {
		return own, nil
	}
	out := make([]int32, 0, len(own)+len(extra))
	out = append(append(out, own...), extra...)
	slices.SortFunc(out, ev.ix.cmp)
	return out, via
}

// viaText says, for a forbid's hits, which were reached through a hub:
// ", on order:o_2 through customer:c_1" (subjects grouped per hub, each
// once, in subject order; at most 5 named per hub).
func (ev *evaluation) viaText(hits []int32, via map[int32]commitlayer.Subject) string {
	if len(via) == 0 {
		return ""
	}
	per := map[commitlayer.Subject][]commitlayer.Subject{}
	var hubs []commitlayer.Subject
	for _, pos := range hits {
		hub, ok := via[pos]
		if !ok {
			continue
		}
		if _, seen := per[hub]; !seen {
			hubs = append(hubs, hub)
		}
		per[hub] = appendUnique(per[hub], ev.ix.fact(pos).Subject)
	}
	if len(hubs) == 0 {
		return ""
	}
	slices.Sort(hubs)
	parts := make([]string, 0, len(hubs))
	for _, hub := range hubs {
		subs := per[hub]
		slices.Sort(subs)
		names := make([]string, 0, min(len(subs), 5))
		for _, s := range subs[:min(len(subs), 5)] {
			names = append(names, string(s))
		}
		more := ""
		if len(subs) > 5 {
			more = fmt.Sprintf(" and %d more", len(subs)-5)
		}
		parts = append(parts, fmt.Sprintf("on %s%s through %s", strings.Join(names, ", "), more, hub))
	}
	return ", " + strings.Join(parts, "; ")
}
