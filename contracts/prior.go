package contracts

import (
	"time"

	"github.com/commitlayer/commitlayer"
)

// PriorQuery names earlier actions of the contract that a limit counts:
// those by Agent (per: agent) or on Subject (per: subject), requested in
// [From, To), the action itself excluded.
type PriorQuery struct {
	Limit   string // the first limit that asks for them
	Agent   string
	Subject commitlayer.Subject
	From    time.Time
	To      time.Time
}

// PriorQueries says which earlier actions the contract's limits count for
// action a, one query per distinct (per, window): the evaluator fetches
// them and passes them, with their subjects' facts, as Input.Prior.
func (c *Contract) PriorQueries(a commitlayer.Action) []PriorQuery {
	var out []PriorQuery
	seen := map[PriorQuery]bool{}
	for _, l := range c.Spec.Limits {
		q := PriorQuery{From: a.RequestedAt.Add(-time.Duration(l.Window)), To: a.RequestedAt}
		if l.Per == PerSubject {
			q.Subject = a.Subject
		} else {
			q.Agent = a.Agent
		}
		if seen[q] {
			continue
		}
		seen[q] = true
		q.Limit = l.ID
		out = append(out, q)
	}
	return out
}
