package contracts

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Input is everything one verification reads.
type Input struct {
	Action commitlayer.Action
	// Facts on the action's, linked and prior actions' subjects (others are ignored).
	Facts []commitlayer.Fact
	// Prior are earlier actions of this contract, for limits; others, and
	// those out of a limit's window or repeated, are ignored.
	Prior []commitlayer.Action
	// Later are the actions of this contract on the action's subject after
	// it (others are ignored). The earliest ends the effect window and an
	// outcome's signal search (not reversals) at its requested_at if not
	// after the watch's end: facts from then on are its own.
	Later    []commitlayer.Action
	Coverage Coverage
	Now      time.Time
}

// Coverage says which sources can be trusted for this verification.
type Coverage struct {
	Connected   []string          // sources that have ever reported for the tenant
	Unreachable map[string]string // source -> error, for this verification (counts as not connected)
}

// actionCtx is one action (verified, or prior) with its subject set, window and variables.
type actionCtx struct {
	action *commitlayer.Action
	ss     *subjectSet
	// next is the following action of the contract on the subject, if
	// known. The effect window is [action.RequestedAt, end], or [..., end)
	// when bounded: next was requested before the watch's end, at end.
	next    *commitlayer.Action
	end     time.Time
	bounded bool
	act     activation
	matches map[*effect]*match
}

// inWindow reports whether t falls in x's effect window.
func (x *actionCtx) inWindow(t time.Time) bool {
	if t.Before(x.action.RequestedAt) {
		return false
	}
	if x.bounded {
		return t.Before(x.end)
	}
	return !t.After(x.end)
}

// match is the outcome of looking for one effect's facts for one action.
type match struct {
	matched     []int32 // positions of facts whose where held, in time order
	unevaluable []int32 // candidates whose where could not be evaluated
	reason      string  // why the first of them could not be
}

type evaluation struct {
	c     *Contract
	in    *Input
	ix    *factIndex
	avail map[string]bool
	found []finding
	// following holds, per subject, the actions that can end a prior
	// action's window, in actionCmp order; built on first use.
	following map[commitlayer.Subject][]*commitlayer.Action
}

type finding struct {
	commitlayer.Finding
	order int
}

// Evaluate verifies one action against the contract. It never fails: bad or
// missing data becomes findings.
func (c *Contract) Evaluate(in Input) commitlayer.Verdict {
	a := &in.Action
	settles := c.SettlesAt(a.RequestedAt)
	ev := &evaluation{c: c, in: &in, avail: map[string]bool{}}
	for _, s := range in.Coverage.Connected {
		ev.avail[s] = true
	}
	for s := range in.Coverage.Unreachable {
		delete(ev.avail, s)
	}
	unavailable := ev.unavailable(c.Spec.Sources...)
	slices.Sort(unavailable)

	priors := ev.priors()
	later := ev.laterOf(a)
	roots := []commitlayer.Subject{a.Subject}
	for _, list := range priors {
		for _, p := range list {
			roots = append(roots, p.Subject)
		}
	}
	ev.ix = newFactIndex(in.Facts, roots, c.throughTypes())
	ctxs := map[*commitlayer.Action]*actionCtx{}
	ctxOf := func(p *commitlayer.Action) *actionCtx {
		if x, ok := ctxs[p]; ok {
			return x
		}
		x := ev.newActionCtx(p, ev.followingOf(p))
		ctxs[p] = x
		return x
	}
	main := ev.newActionCtx(a, later)
	ctxs[a] = main

	ev.checkSubjectType()
	ev.checkPolicy(main)
	for i, l := range c.limits {
		acts := []*actionCtx{main}
		for _, p := range priors[i] {
			acts = append(acts, ctxOf(p))
		}
		ev.checkLimit(l, acts)
	}
	if c.Spec.Kind == KindOutcome && !ev.anySignal(main) {
		until := ""
		if main.next != nil {
			until = fmt.Sprintf(" until the next action%s at %s", idText(main.next.ID), stamp(main.next.RequestedAt))
		}
		ev.add(commitlayer.CodeNoSignal, "effects", commitlayer.LensOutcome, c.effects[0].order, nil,
			"no fact of any effect's kind (%s) on %s or its linked subjects since the action%s", ev.kindList(), a.Subject, until)
	} else {
		for _, e := range c.effects {
			ev.checkEffect(main, e)
		}
	}
	for _, f := range c.forbids {
		ev.checkForbid(main, f)
	}

	sort.SliceStable(ev.found, func(i, j int) bool {
		fi, fj := ev.found[i], ev.found[j]
		if fi.Lens != fj.Lens {
			return fi.Lens == commitlayer.LensOutcome
		}
		return fi.order < fj.order
	})
	v := commitlayer.Verdict{
		ActionID:           a.ID,
		Contract:           c.Spec.ID,
		Findings:           make([]commitlayer.Finding, 0, len(ev.found)),
		UnavailableSources: unavailable,
		EvaluatedAt:        in.Now,
		SettlesAt:          settles,
		Provisional:        in.Now.Before(settles),
		Lenses:             commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass},
	}
	for _, f := range ev.found {
		st := commitlayer.StatusFail
		if f.Code == commitlayer.CodeSourceUnavailable || f.Code == commitlayer.CodeNoSignal {
			st = commitlayer.StatusUnknown
		}
		if f.Lens == commitlayer.LensOutcome {
			v.Lenses.Outcome = commitlayer.Worse(v.Lenses.Outcome, st)
		} else {
			v.Lenses.Policy = commitlayer.Worse(v.Lenses.Policy, st)
		}
		f.Hint = c.Hint(f.Finding)
		v.Findings = append(v.Findings, f.Finding)
	}
	v.Status = commitlayer.Worse(v.Lenses.Outcome, v.Lenses.Policy)
	switch a.Claim.Status {
	case commitlayer.ClaimSuccess:
		v.ClaimContradicted = v.Lenses.Outcome == commitlayer.StatusFail
	case commitlayer.ClaimFailure:
		v.ClaimContradicted = v.Lenses.Outcome == commitlayer.StatusPass
	}
	return v
}

// priors returns, per limit, the prior actions it counts (same contract,
// agent or subject, window; not a itself), each id once, in time order.
func (ev *evaluation) priors() [][]*commitlayer.Action {
	a := &ev.in.Action
	out := make([][]*commitlayer.Action, len(ev.c.limits))
	for i, l := range ev.c.limits {
		from := a.RequestedAt.Add(-time.Duration(l.spec.Window))
		seen := map[string]bool{}
		for j := range ev.in.Prior {
			p := &ev.in.Prior[j]
			switch {
			case p.Contract != ev.c.Spec.ID,
				p.ID != "" && p.ID == a.ID,
				p.RequestedAt.Before(from) || p.RequestedAt.After(a.RequestedAt),
				l.spec.Per == PerAgent && p.Agent != a.Agent,
				l.spec.Per == PerSubject && p.Subject != a.Subject:
				continue
			}
			if p.ID != "" {
				if seen[p.ID] {
					continue
				}
				seen[p.ID] = true
			}
			out[i] = append(out[i], p)
		}
		slices.SortStableFunc(out[i], actionCmp)
	}
	return out
}

// laterOf returns the earliest action of in.Later that ends a's window: of
// this contract, on a's subject, requested after a, not a itself.
func (ev *evaluation) laterOf(a *commitlayer.Action) *commitlayer.Action {
	var next *commitlayer.Action
	for i := range ev.in.Later {
		l := &ev.in.Later[i]
		if l.Contract != ev.c.Spec.ID || l.Subject != a.Subject || !l.RequestedAt.After(a.RequestedAt) ||
			l.ID != "" && l.ID == a.ID {
			continue
		}
		if next == nil || actionCmp(l, next) < 0 {
			next = l
		}
	}
	return next
}

// followingOf returns the earliest known action (verified, Prior or Later)
// that ends prior action p's window, as laterOf does for the verified one.
func (ev *evaluation) followingOf(p *commitlayer.Action) *commitlayer.Action {
	if ev.following == nil {
		ev.following = map[commitlayer.Subject][]*commitlayer.Action{}
		add := func(x *commitlayer.Action) {
			ev.following[x.Subject] = append(ev.following[x.Subject], x)
		}
		add(&ev.in.Action)
		for _, list := range [][]commitlayer.Action{ev.in.Prior, ev.in.Later} {
			for i := range list {
				if list[i].Contract == ev.c.Spec.ID {
					add(&list[i])
				}
			}
		}
		for _, list := range ev.following {
			slices.SortStableFunc(list, actionCmp)
		}
	}
	list := ev.following[p.Subject]
	i, _ := slices.BinarySearchFunc(list, p.RequestedAt, func(x *commitlayer.Action, t time.Time) int {
		if !x.RequestedAt.After(t) {
			return -1
		}
		return 1
	})
	for ; i < len(list); i++ {
		if x := list[i]; x != p && (x.ID == "" || x.ID != p.ID) {
			return x
		}
	}
	return nil
}

func actionCmp(x, y *commitlayer.Action) int {
	if c := x.RequestedAt.Compare(y.RequestedAt); c != 0 {
		return c
	}
	return strings.Compare(x.ID, y.ID)
}

// newActionCtx prepares action a, whose window next (when not nil) ends.
func (ev *evaluation) newActionCtx(a *commitlayer.Action, next *commitlayer.Action) *actionCtx {
	x := &actionCtx{action: a, ss: ev.ix.subjectSet(a.Subject), next: next, end: ev.c.WatchUntil(a.RequestedAt),
		matches: map[*effect]*match{}}
	if next != nil && !next.RequestedAt.After(x.end) {
		x.end, x.bounded = next.RequestedAt, true
	}
	params := map[string]any(a.Params)
	if params == nil {
		params = map[string]any{}
	}
	x.act.params = exact.NativeToValue(params)
	x.act.action = exact.NativeToValue(map[string]any{
		"id":           a.ID,
		"agent":        a.Agent,
		"subject":      string(a.Subject),
		"subject_type": a.Subject.Type(),
		"subject_id":   a.Subject.ID(),
		"requested_at": a.RequestedAt,
		"claim_status": a.Claim.Status,
	})
	x.act.state = exact.NativeToValue(ev.ix.state(x.ss, ev.c.Spec.Sources, a.RequestedAt))
	return x
}

// unavailable returns the unavailable sources, each once; never nil (a verdict's list).
func (ev *evaluation) unavailable(sources ...string) []string {
	out := []string{}
	for _, s := range sources {
		if !ev.avail[s] {
			out = appendUnique(out, s)
		}
	}
	return out
}
