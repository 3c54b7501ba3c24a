package contracts

import (
	"slices"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Digest says what a batch of facts holds beyond its subjects: each kind
// with its earliest occurred_at, and whether any fact links a subject. It
// tells, without reading the store, that a batch cannot change a
// verification's answer (Contract.MayChange).
type Digest struct {
	Kinds  []KindSince
	Linked bool
}

// KindSince is one kind of a Digest and the earliest occurred_at of its facts.
type KindSince struct {
	commitlayer.FactType
	Earliest time.Time
}

// DigestFacts digests facts; nil when there are none.
func DigestFacts(facts []commitlayer.Fact) *Digest {
	if len(facts) == 0 {
		return nil
	}
	d := &Digest{}
	for i := range facts {
		f := &facts[i]
		d.Linked = d.Linked || len(f.Links) > 0
		d.add(KindSince{FactType: commitlayer.FactType{Source: f.Source, Type: f.Type}, Earliest: f.OccurredAt})
	}
	return d
}

// add notes k: a new kind, or an earlier time of one already there.
func (d *Digest) add(k KindSince) {
	j := slices.IndexFunc(d.Kinds, func(o KindSince) bool { return o.FactType == k.FactType })
	switch {
	case j < 0:
		d.Kinds = append(d.Kinds, k)
	case k.Earliest.Before(d.Kinds[j].Earliest):
		d.Kinds[j].Earliest = k.Earliest
	}
}
