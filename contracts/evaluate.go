package contracts

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/commitlayer/commitlayer"
)

// Input is everything one verification reads.
type Input struct {
	Action commitlayer.Action
	// Facts on the action's subject and linked subjects (and, for limits,
	// on prior actions' subjects); unrelated facts may be included.
	Facts []commitlayer.Fact
	// Prior are earlier actions of this contract, for limits; actions of
	// other contracts, outside the window or repeated are ignored.
	Prior []commitlayer.Action
	// Later are the actions of this contract on the action's subject
	// requested after it. The earliest one ends the action's effect window
	// (effects, duplicates, expect, forbids, limits) at its requested_at,
	// exclusive, when that is not after requested_at + settlement + watch:
	// facts from then on are its own. It also ends the search for a signal
	// of an outcome contract. Reversals stay unbounded. Entries of other
	// contracts or subjects, not after the action, or with its id are
	// ignored.
	Later    []commitlayer.Action
	Coverage Coverage
	Now      time.Time
}

// Coverage says which sources can be trusted for this verification.
type Coverage struct {
	Connected   []string          // sources that have ever reported for the tenant
	Unreachable map[string]string // source -> error, for this verification (counts as not connected)
}

// activation binds the CEL variables for one evaluation; it is reused, with
// effect and original swapped per fact.
type activation struct {
	params, action, state, effect, original ref.Val
}

func (a *activation) ResolveName(name string) (any, bool) {
	var v ref.Val
	switch name {
	case "params":
		v = a.params
	case "action":
		v = a.action
	case "state":
		v = a.state
	case "effect":
		v = a.effect
	case "original":
		v = a.original
	}
	return v, v != nil
}

func (a *activation) Parent() interpreter.Activation { return nil }

var emptyMap = types.DefaultTypeAdapter.NativeToValue(map[string]any{})

// run evaluates p; a panic inside CEL becomes an error, never a crash.
func run(p *program, act *activation) (out ref.Val, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("internal error: %v", r)
		}
	}()
	out, _, err = p.prg.Eval(act)
	if err == nil && types.IsError(out) {
		err = fmt.Errorf("%v", out)
	}
	return out, err
}

func runBool(p *program, act *activation) (bool, error) {
	out, err := run(p, act)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("result is %s, not a bool", typeName(out))
	}
	return bool(b), nil
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}

// actionCtx is one action (the one verified, or a prior one for limits)
// with its subject set, effect window and variables.
type actionCtx struct {
	action *commitlayer.Action
	ss     *subjectSet
	// next is the following action of the contract on the subject, if
	// known. The effect window is [action.RequestedAt, end], or
	// [action.RequestedAt, end) when bounded: next was requested before
	// the usual end, and end is its requested_at.
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

// windowText describes the window's end for messages.
func (x *actionCtx) windowText() string {
	if x.bounded {
		return fmt.Sprintf("from %s until %s, when the next action%s was requested", stamp(x.action.RequestedAt), stamp(x.end), idText(x.next.ID))
	}
	return fmt.Sprintf("from %s to %s", stamp(x.action.RequestedAt), stamp(x.end))
}

func idText(id string) string {
	if id == "" {
		return ""
	}
	return " " + id
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
	// action's window (the action, Prior and Later of this contract), by
	// requested_at then id; built on first use.
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
	unavailable := []string{}
	for _, s := range c.Spec.Sources {
		if !ev.avail[s] {
			unavailable = append(unavailable, s)
		}
	}
	sort.Strings(unavailable)

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

// priors returns, per limit, the prior actions that count for it: same
// contract, same agent (or subject), requested in [requested_at − window,
// requested_at], not the action itself, each id once, in time order.
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
		slices.SortStableFunc(out[i], func(x, y *commitlayer.Action) int {
			if c := x.RequestedAt.Compare(y.RequestedAt); c != 0 {
				return c
			}
			return strings.Compare(x.ID, y.ID)
		})
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

// followingOf returns the earliest known action that ends prior action p's
// window: the verified action, an entry of Prior or of Later, of this
// contract, on p's subject, requested after p, not p itself.
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
	x.act.params = types.DefaultTypeAdapter.NativeToValue(params)
	x.act.action = types.DefaultTypeAdapter.NativeToValue(map[string]any{
		"id":           a.ID,
		"agent":        a.Agent,
		"subject":      string(a.Subject),
		"subject_type": a.Subject.Type(),
		"subject_id":   a.Subject.ID(),
		"requested_at": a.RequestedAt,
		"claim_status": a.Claim.Status,
	})
	x.act.state = types.DefaultTypeAdapter.NativeToValue(ev.ix.state(x.ss, ev.c.Spec.Sources, a.RequestedAt))
	return x
}

func (ev *evaluation) add(code commitlayer.Code, check string, lens commitlayer.Lens, order int, facts []int32, format string, args ...any) {
	ids := make([]string, 0, len(facts))
	for _, pos := range facts {
		ids = append(ids, ev.ix.fact(pos).ExternalID)
	}
	ev.found = append(ev.found, finding{order: order, Finding: commitlayer.Finding{
		Code: code, Check: check, Lens: lens, Facts: ids, Message: check + ": " + fmt.Sprintf(format, args...),
	}})
}

// unavailable returns the given sources that are not available, each once.
func (ev *evaluation) unavailable(sources ...string) []string {
	var out []string
	for _, s := range sources {
		if !ev.avail[s] && !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (ev *evaluation) addUnavailable(check string, lens commitlayer.Lens, order int, sources []string) {
	parts := make([]string, len(sources))
	for i, s := range sources {
		if _, down := ev.in.Coverage.Unreachable[s]; down {
			parts[i] = s + " is unreachable for this verification"
		} else {
			parts[i] = s + " has never reported"
		}
	}
	ev.add(commitlayer.CodeSourceUnavailable, check, lens, order, nil, "cannot be verified: %s", strings.Join(parts, "; "))
}

func (ev *evaluation) checkSubjectType() {
	want := ev.c.Spec.Subject
	if got := ev.in.Action.Subject.Type(); want != "" && got != want {
		ev.add(commitlayer.CodePolicyViolation, "subject", commitlayer.LensPolicy, -1, nil,
			"subject type: the action's subject %q is of type %q; the contract is for %q", ev.in.Action.Subject, got, want)
	}
}

func (ev *evaluation) checkPolicy(x *actionCtx) {
	for _, r := range ev.c.policy {
		reads := r.prg.stateReads
		if r.prg.stateDynamic {
			reads = ev.c.Spec.Sources
		}
		down := ev.unavailable(reads...)
		ok, err := runBool(r.prg, &x.act)
		if err != nil && len(down) == 0 {
			// A value the rule needs is missing. State is folded over the
			// subject and the subjects linked to it, and links come from
			// facts of any source: with one of the contract's sources
			// unavailable, the value may sit on a subject only that source
			// links (an order's customer), so the rule is unknown, not
			// violated.
			down = ev.unavailable(ev.c.Spec.Sources...)
		}
		switch {
		case err == nil && !ok:
			if r.spec.Message != "" {
				ev.add(commitlayer.CodePolicyViolation, r.spec.ID, commitlayer.LensPolicy, r.order, nil, "%s", r.spec.Message)
			} else {
				ev.add(commitlayer.CodePolicyViolation, r.spec.ID, commitlayer.LensPolicy, r.order, nil, "rule %s is false", oneLine(r.spec.Rule))
			}
		case len(down) > 0:
			ev.addUnavailable(r.spec.ID, commitlayer.LensPolicy, r.order, down)
		case err != nil:
			msg := ""
			if r.spec.Message != "" {
				msg = r.spec.Message + "; "
			}
			ev.add(commitlayer.CodePolicyViolation, r.spec.ID, commitlayer.LensPolicy, r.order, nil,
				"%srule %s could not be evaluated: %v", msg, oneLine(r.spec.Rule), err)
		}
	}
}

// matchEffect finds the facts of effect e for action x: on its subject set,
// of e's source and type, in x's window, where e.where holds. Cached per
// action and effect.
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
	case !ev.avail[f.kind.Source]:
		ev.addUnavailable(f.spec.ID, commitlayer.LensPolicy, f.order, []string{f.kind.Source})
	}
}

// throughCandidates returns forbid f's candidates for action x: the facts of
// its kind on x's subject set, and those on the subjects linked one hop to a
// hub of f's `through` type in the subject set, in time order. via maps each
// fact of the second kind to the first hub (in subject order) it was reached
// through.
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
		if s := ev.ix.fact(pos).Subject; !slices.Contains(per[hub], s) {
			per[hub] = append(per[hub], s)
		}
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

// total adds int64s exactly (saturating on overflow) until a double
// appears, then adds as float64.
type total struct {
	isFloat bool
	i       int64
	f       float64
}

func (t *total) add(v ref.Val) error {
	switch n := v.(type) {
	case types.Int:
		if t.isFloat {
			t.f += float64(n)
			return nil
		}
		s := t.i + int64(n)
		if (int64(n) > 0 && s < t.i) || (int64(n) < 0 && s > t.i) {
			if n > 0 {
				s = math.MaxInt64
			} else {
				s = math.MinInt64
			}
		}
		t.i = s
	case types.Uint:
		if uint64(n) > math.MaxInt64 {
			return t.add(types.Double(float64(n)))
		}
		return t.add(types.Int(int64(n)))
	case types.Double:
		if !t.isFloat {
			t.isFloat, t.f = true, float64(t.i)
		}
		t.f += float64(n)
		if math.IsNaN(t.f) {
			return fmt.Errorf("sum is not a number")
		}
	default:
		return fmt.Errorf("sum is %s, not a number", typeName(v))
	}
	return nil
}

func (t *total) exceeds(max int64) bool {
	if t.isFloat {
		return t.f > float64(max)
	}
	return t.i > max
}

func (t *total) String() string {
	if t.isFloat {
		return strconv.FormatFloat(t.f, 'f', -1, 64)
	}
	return strconv.FormatInt(t.i, 10)
}

func (ev *evaluation) checkLimit(l *limit, acts []*actionCtx) {
	id, order, lens := l.spec.ID, l.order, commitlayer.LensPolicy
	e := ev.c.effects[l.effect]
	seen := map[int32]bool{}
	var counted, unsummable []int32
	var sum total
	reason := ""
	for _, x := range acts {
		for _, pos := range ev.matchEffect(x, e).matched {
			if seen[pos] {
				continue
			}
			seen[pos] = true
			if l.spec.Count {
				_ = sum.add(types.Int(1))
				counted = append(counted, pos)
				continue
			}
			x.act.effect = ev.ix.effectVal(pos)
			out, err := run(l.sum, &x.act)
			x.act.effect = nil
			if err == nil {
				err = sum.add(out)
			}
			if err != nil {
				if reason == "" {
					reason = fmt.Sprintf("fact %s: %v", ev.ix.fact(pos).ExternalID, err)
				}
				unsummable = append(unsummable, pos)
				continue
			}
			counted = append(counted, pos)
		}
	}
	slices.SortFunc(counted, ev.ix.cmp)
	slices.SortFunc(unsummable, ev.ix.cmp)
	failed := false
	if sum.exceeds(l.spec.Max) {
		failed = true
		what := "sum of " + oneLine(l.spec.Sum)
		if l.spec.Count {
			what = "count of " + e.spec.ID
		}
		who := string(ev.in.Action.Subject)
		if l.spec.Per == PerAgent {
			who = ev.in.Action.Agent
		}
		ev.add(commitlayer.CodeLimitExceeded, id, lens, order, counted,
			"%s is %s over %s for %s %s (%d %s), more than the max %d",
			what, sum.String(), l.spec.Window, l.spec.Per, who, len(acts), plural(len(acts), "action", "actions"), l.spec.Max)
	}
	if len(unsummable) > 0 {
		failed = true
		ev.add(commitlayer.CodePolicyViolation, id, lens, order, unsummable,
			"%d %s could not be summed with %s: %s", len(unsummable), plural(len(unsummable), "fact", "facts"), oneLine(l.spec.Sum), reason)
	}
	if !failed && !ev.avail[e.kind.Source] {
		ev.addUnavailable(id, lens, order, []string{e.kind.Source})
	}
}

// anySignal reports whether any fact of any effect's kind exists on the
// subject set at or after requested_at and before the next action's
// requested_at (with no upper bound when there is no next action).
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

func (ev *evaluation) kindList() string {
	var parts []string
	for _, e := range ev.c.effects {
		k := e.kind.Source + " " + e.kind.Type
		if !contains(parts, k) {
			parts = append(parts, k)
		}
	}
	return strings.Join(parts, ", ")
}

// values lists the effect.<k> and params.<k> values an expect reads, for
// the message: " (effect.amount=2600, params.amount=2500)".
func (ev *evaluation) values(p *program, f *commitlayer.Fact, a *commitlayer.Action) string {
	var parts []string
	for _, k := range p.effectAttrs {
		parts = append(parts, "effect."+k+"="+showValue(lookup(f.Attrs, k)))
	}
	for _, k := range p.paramKeys {
		parts = append(parts, "params."+k+"="+showValue(lookup(a.Params, k)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

type missing struct{}

func lookup(m commitlayer.Attrs, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return missing{}
}

func showValue(v any) string {
	switch x := v.(type) {
	case missing:
		return "(missing)"
	case nil:
		return "null"
	case string:
		if len(x) > 80 {
			x = x[:77] + "..."
		}
		return strconv.Quote(x)
	default:
		s := fmt.Sprintf("%v", x)
		if len(s) > 80 {
			s = s[:77] + "..."
		}
		return s
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
