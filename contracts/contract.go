package contracts

import (
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Contract is a parsed, validated and compiled contract, immutable and safe
// for concurrent use (Spec must not be modified after Parse).
type Contract struct {
	Spec Spec

	idLine   int
	sources  map[string]bool
	policy   []*rule
	limits   []*limit
	effects  []*effect
	forbids  []*forbid
	bindings []*binding
	remedies map[string]commitlayer.Remedy // check id → its remedy override
}

// A check's order is its position in the contract (policy, limits,
// effects, forbids); findings are sorted by it.
type rule struct {
	spec  *Rule
	order int
	prg   *program
}

type limit struct {
	spec   *Limit
	order  int
	effect int // index into Contract.effects
	sum    *program
}

type effect struct {
	spec          *Effect
	order         int
	kind          commitlayer.FactType
	where, expect *program
	reversal      *commitlayer.FactType
	reversalWhere *program
}

type forbid struct {
	spec    *Forbid
	order   int
	kind    commitlayer.FactType
	where   *program
	through string // a subject type, or ""
}

// ID is the contract id.
func (c *Contract) ID() string { return c.Spec.ID }

// Kind is action (the default) or outcome.
func (c *Contract) Kind() ContractKind { return c.Spec.Kind }

// ActsOn reports whether s is of the contract's subject type (any if it names none).
func (c *Contract) ActsOn(s commitlayer.Subject) bool {
	return c.Spec.Subject == "" || s.Type() == c.Spec.Subject
}

// Sources returns the contract's sources, in contract order.
func (c *Contract) Sources() []string { return slices.Clone(c.Spec.Sources) }

// Settlement is how long after requested_at the verdict stays provisional.
func (c *Contract) Settlement() time.Duration { return time.Duration(c.Spec.Settlement) }

// Watch is how long after settlement reversals are still looked for.
func (c *Contract) Watch() time.Duration { return time.Duration(c.Spec.Watch) }

// SettlesAt is requestedAt + settlement.
func (c *Contract) SettlesAt(requestedAt time.Time) time.Time {
	return requestedAt.Add(c.Settlement())
}

// WatchUntil is SettlesAt + watch: the end of an action's effect window.
func (c *Contract) WatchUntil(requestedAt time.Time) time.Time {
	return c.SettlesAt(requestedAt).Add(c.Watch())
}

// EffectKinds returns the fact kinds the effects, reversals and forbids
// read, in contract order, each once: what a store fetches for them.
func (c *Contract) EffectKinds() []commitlayer.FactType {
	var out []commitlayer.FactType
	for _, e := range c.effects {
		out = appendUnique(out, e.kind)
		if e.reversal != nil {
			out = appendUnique(out, *e.reversal)
		}
	}
	for _, f := range c.forbids {
		out = appendUnique(out, f.kind)
	}
	return out
}

// MayChange reports whether facts like d describes could change an
// evaluation of an action requested at requestedAt (its priors' included).
// Evaluate reads facts only through their links, the kinds EffectKinds
// names, and the state: contract sources' attrs from before an action (a
// prior is never later). Facts read by none of these leave the verdict as
// it was (FuzzEvaluate checks it). A nil d says nothing: true. Coverage is
// not considered: a source's first facts make it connected.
func (c *Contract) MayChange(d *Digest, requestedAt time.Time) bool {
	if d == nil || d.Linked {
		return true
	}
	read := c.EffectKinds()
	for _, k := range d.Kinds {
		if slices.Contains(read, k.FactType) || (slices.Contains(c.Spec.Sources, k.Source) && k.Earliest.Before(requestedAt)) {
			return true
		}
	}
	return false
}

// throughTypes returns the forbids' `through` types, each once.
func (c *Contract) throughTypes() []string {
	var out []string
	for _, f := range c.forbids {
		if f.through != "" {
			out = appendUnique(out, f.through)
		}
	}
	return out
}

// ThroughSubjects returns the subjects of a `through` type linked one hop
// to a's subject in facts (never a's own), sorted: the caller fetches the
// facts on them and their one-hop subjects for Evaluate too (a fact given
// twice counts once).
func (c *Contract) ThroughSubjects(a commitlayer.Action, facts []commitlayer.Fact) []commitlayer.Subject {
	types := c.throughTypes()
	if len(types) == 0 {
		return nil
	}
	seen := map[commitlayer.Subject]bool{}
	var out []commitlayer.Subject
	add := func(s commitlayer.Subject) {
		if s != a.Subject && !seen[s] && ofType(s, types) {
			seen[s] = true
			out = append(out, s)
		}
	}
	for i := range facts {
		f := &facts[i]
		if f.Subject == a.Subject {
			for _, l := range f.Links {
				add(l)
			}
			continue
		}
		if slices.Contains(f.Links, a.Subject) {
			add(f.Subject)
		}
	}
	slices.Sort(out)
	return out
}

// ofType reports whether s is "type:id" with an id and a type in types.
func ofType(s commitlayer.Subject, types []string) bool {
	typ, id, ok := strings.Cut(string(s), ":")
	return ok && id != "" && slices.Contains(types, typ)
}
