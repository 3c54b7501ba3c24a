package contracts

import (
	"fmt"
	"strings"

	"github.com/commitlayer/commitlayer"
)

// matchEffect finds the facts of effect e for action x: on its subject set,
// of e's kind, in x's window, where e.where holds (cached per x and e).
func (ev *evaluation) matchEffect(x *actionCtx, e *effect) *match {
	if m, ok := x.matches[e]; ok {
		return m
	}
	m := &match{}
	for _, pos := range x.ss.byKind[e.kind] {
		if !x.inWindow(ev.ix.fact(pos).OccurredAt) {
			continue
		}
		if e.where != nil {
			x.act.effect = ev.ix.effectVal(pos)
			ok, err := runBool(e.where, &x.act)
			if err != nil {
				if m.reason == "" {
					m.reason = err.Error()
				}
				m.unevaluable = append(m.unevaluable, pos)
				continue
			}
			if !ok {
				continue
			}
		}
		m.matched = append(m.matched, pos)
	}
	x.act.effect = nil
	x.matches[e] = m
	return m
}

func (ev *evaluation) checkEffect(x *actionCtx, e *effect) {
	id, order, lens := e.spec.ID, e.order, commitlayer.LensOutcome
	srcs := []string{e.kind.Source}
	if e.reversal != nil {
		srcs = append(srcs, e.reversal.Source)
	}
	down := ev.unavailable(srcs...)
	m := ev.matchEffect(x, e)
	if len(m.matched) == 0 {
		if !ev.avail[e.kind.Source] {
			ev.addUnavailable(id, lens, order, down)
			return
		}
		msg := fmt.Sprintf("no %s %s fact on %s or its linked subjects %s", e.kind.Source, e.kind.Type,
			x.action.Subject, x.windowText())
		if n := len(m.unevaluable); n > 0 {
			msg += fmt.Sprintf(" where %s; %d candidate %s could not be evaluated: %s",
				oneLine(e.spec.Where), n, plural(n, "fact", "facts"), m.reason)
		} else if e.where != nil {
			msg += " where " + oneLine(e.spec.Where)
		}
		ev.add(commitlayer.CodeMissingEffect, id, lens, order, m.unevaluable, "%s", msg)
		return
	}
	failed := false
	if n := e.spec.Count; n > 0 && len(m.matched) > n {
		failed = true
		ev.add(commitlayer.CodeDuplicateEffect, id, lens, order, m.matched,
			"%d %s %s facts where at most %d %s expected", len(m.matched), e.kind.Source, e.kind.Type, n, plural(n, "was", "were"))
	}
	if e.expect != nil {
		for _, pos := range m.matched {
			x.act.effect = ev.ix.effectVal(pos)
			ok, err := runBool(e.expect, &x.act)
			if err == nil && ok {
				continue
			}
			failed = true
			f := ev.ix.fact(pos)
			if err != nil {
				ev.add(commitlayer.CodeEffectDiffers, id, lens, order, []int32{pos},
					"fact %s: expect %s could not be evaluated: %v", f.ExternalID, oneLine(e.spec.Expect), err)
			} else {
				ev.add(commitlayer.CodeEffectDiffers, id, lens, order, []int32{pos},
					"fact %s differs from the request: %s is false%s", f.ExternalID, oneLine(e.spec.Expect), ev.values(e.expect, f, x.action))
			}
		}
	}
	if e.reversal != nil {
		candidates := x.ss.byKind[*e.reversal]
		for _, pos := range m.matched {
			orig := ev.ix.fact(pos)
			facts := []int32{pos}
			for _, rp := range candidates {
				r := ev.ix.fact(rp)
				if rp == pos || r.OccurredAt.Before(orig.OccurredAt) {
					continue
				}
				if e.reversalWhere != nil {
					x.act.effect, x.act.original = ev.ix.effectVal(rp), ev.ix.effectVal(pos)
					if ok, err := runBool(e.reversalWhere, &x.act); err != nil || !ok {
						continue
					}
				}
				facts = append(facts, rp)
			}
			if len(facts) > 1 {
				failed = true
				ids := make([]string, 0, len(facts)-1)
				for _, rp := range facts[1:] {
					ids = append(ids, ev.ix.fact(rp).ExternalID)
				}
				ev.add(commitlayer.CodeEffectReversed, id, lens, order, facts,
					"fact %s was reversed by %s %s %s", orig.ExternalID, e.reversal.Source, e.reversal.Type, strings.Join(ids, ", "))
			}
		}
		x.act.original = nil
	}
	x.act.effect = nil
	if !failed && len(down) > 0 {
		ev.addUnavailable(id, lens, order, down)
	}
}

// anySignal reports whether a fact of any effect's kind is on the subject
// set from requested_at until the next action's (unbounded without one).
func (ev *evaluation) anySignal(x *actionCtx) bool {
	for _, e := range ev.c.effects {
		for _, pos := range x.ss.byKind[e.kind] {
			at := ev.ix.fact(pos).OccurredAt
			if !at.Before(x.action.RequestedAt) && (x.next == nil || at.Before(x.next.RequestedAt)) {
				return true
			}
		}
	}
	return false
}
