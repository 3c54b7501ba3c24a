package contracts

import (
	"time"
)

// Contract is a parsed, validated and compiled contract. It is immutable and
// safe for concurrent use; Spec must not be modified after Parse.
type Contract struct {
	Spec Spec

	idLine  int
	sources map[string]bool
	policy  []*rule
	limits  []*limit
	effects []*effect
	forbids []*forbid
}

// Check ordering: every check has an order (its position in the contract:
// policy, limits, effects, forbids), used to sort findings.
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
	kind          Kind
	where, expect *program
	reversal      *Kind
	reversalWhere *program
}

type forbid struct {
	spec  *Forbid
	order int
	kind  Kind
	where *program
}

// ID is the contract id.
func (c *Contract) ID() string { return c.Spec.ID }

// Kind is action (the default) or outcome.
func (c *Contract) Kind() ContractKind { return c.Spec.Kind }

// Sources returns the contract's sources, in contract order.
func (c *Contract) Sources() []string { return append([]string(nil), c.Spec.Sources...) }

// Settlement is how long after requested_at the verdict stays provisional.
func (c *Contract) Settlement() time.Duration { return time.Duration(c.Spec.Settlement) }

// Watch is how long after settlement reversals are still looked for.
func (c *Contract) Watch() time.Duration { return time.Duration(c.Spec.Watch) }

// SettlesAt is requestedAt + settlement.
func (c *Contract) SettlesAt(requestedAt time.Time) time.Time {
	return requestedAt.Add(c.Settlement())
}

// WatchUntil is SettlesAt + watch: the end of the window in which effects,
// duplicates and forbidden effects of an action are looked for.
func (c *Contract) WatchUntil(requestedAt time.Time) time.Time {
	return c.SettlesAt(requestedAt).Add(c.Watch())
}

// EffectKinds returns the (source, type) pairs the contract's effects,
// reversals and forbids read, in contract order without repeats, so a store
// can fetch exactly those facts for orphans and limits.
func (c *Contract) EffectKinds() []Kind {
	var out []Kind
	seen := map[Kind]bool{}
	add := func(k Kind) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, e := range c.effects {
		add(e.kind)
		if e.reversal != nil {
			add(*e.reversal)
		}
	}
	for _, f := range c.forbids {
		add(f.kind)
	}
	return out
}
