package contracts

import (
	"slices"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Digest says what a batch of facts holds beyond its subjects: each kind
// among them with the earliest time one occurred, and whether any links a
// subject. It is enough to tell, without reading the store, that the batch
// cannot change a verification's answer (Contract.MayChange): most facts
// on a watched subject are of a kind its contract never reads. The store
// keeps it with the notice of the batch.
type Digest struct {
	Kinds  []KindSince
	Linked bool
}

// KindSince is one kind of a Digest and the earliest occurred_at of its
// facts.
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
