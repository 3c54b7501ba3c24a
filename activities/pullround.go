package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/pull"
)

// pullsRecorder is a store that records several connectors' pages in one
// transaction (postgres.DB.RecordPulls).
type pullsRecorder interface {
	RecordPulls(ctx context.Context, tenantID string, pages []commitlayer.PulledPage, at time.Time) (commitlayer.InsertResult, error)
}

// pullConnectors pulls the tenant's connectors, each from its cursor, at
// once: first every feed's first page (firsts[i], when not nil, is
// conns[i]'s asked ahead: pullAhead), then the first pages that brought
// anything stored together in one transaction when the store can
// (pullsRecorder; otherwise each with RecordPull), then each feed that has
// more read on, page by page (pullFeed). A first page with nothing after
// the connector's cursor is not recorded here (connectorPull.empty: the
// tenant's pull records those together, recordEmptyPulls).
//
// A verification's first pass pulls a tenant whose systems most often all
// have something new (the agent just acted); one transaction for all of
// their pages is one commit and a handful of round trips where one per
// connector took their round trips each and more pooled connections than
// the pool has.
func (a *Activities) pullConnectors(ctx context.Context, tenantID string, conns []commitlayer.Connector, firsts []*aheadPull) []connectorPull {
	// The pull's requests carry the tenant they are made for: a transport
	// may route or label them by tenant (PullTenant).
	ctx = withPullTenant(ctx, tenantID)
	results := make([]connectorPull, len(conns))
	pullers := make([]pull.Puller, len(conns))
	pages := make([]commitlayer.FactPage, len(conns))
	parallel(len(conns), func(i int) {
		c := conns[i]
		if heartbeats(ctx) {
			activity.RecordHeartbeat(ctx, c.Source)
		}
		var err error
		if first := firsts[i]; first != nil {
			pullers[i] = first.puller
			pages[i], err = first.wait()
		} else if pullers[i], err = a.openConnector(tenantID, c); err != nil {
			results[i].err = fmt.Errorf("connector %s: %w", c.ID, err)
			return
		} else {
			pages[i], err = pullers[i].Pull(ctx, c.Source, c.Cursor)
		}
		if err != nil {
			results[i].err = fmt.Errorf("pull %s: %w", c.Source, err)
			return
		}
		if len(pages[i].Facts) == 0 && pages[i].Next == c.Cursor {
			results[i] = connectorPull{drained: true, empty: true, cursor: &c.Cursor}
		}
	})
	var (
		moved []int // the connectors whose first page is to be stored
		batch []commitlayer.PulledPage
	)
	for i, c := range conns {
		if results[i].err == nil && !results[i].empty {
			moved = append(moved, i)
			batch = append(batch, commitlayer.PulledPage{ConnectorID: c.ID, Facts: pages[i].Facts, Cursor: pages[i].Next})
		}
	}
	stored := false
	if rp, ok := a.Store.(pullsRecorder); ok && len(moved) > 1 {
		ins, err := rp.RecordPulls(ctx, tenantID, batch, a.now())
		switch {
		case err == nil:
			for k, i := range moved {
				if k == 0 {
					// The batch's facts and notice, counted once.
					results[i] = firstStored(ins, pages[i].Next)
				} else {
					results[i] = firstStored(commitlayer.InsertResult{}, pages[i].Next)
				}
			}
			stored = true
		case errors.Is(err, commitlayer.ErrUnavailable) || ctx.Err() != nil:
			// The database failing fails the whole pull (a retry reads
			// the pages again); the transaction stored nothing.
			for _, i := range moved {
				results[i].err = &storeError{fmt.Errorf("store pulls of %d connectors: %w", len(moved), err)}
			}
			stored = true
		default:
			// A page the store refuses (a fact it cannot keep, a
			// connector removed meanwhile) must not keep the others'
			// out: each page on its own, as without the batch, and the
			// refused one fails as it would have.
			a.logger(ctx).Debug("pages stored one by one after their batch was refused", "tenant", tenantID, "error", err)
		}
	}
	if !stored {
		parallel(len(moved), func(k int) {
			i := moved[k]
			c := conns[i]
			ins, err := a.Store.RecordPull(ctx, tenantID, c.ID, pages[i].Facts, pages[i].Next, a.now())
			if err != nil {
				results[i].err = pageStoreError(c, err)
				return
			}
			results[i] = firstStored(ins, pages[i].Next)
		})
	}
	parallel(len(moved), func(k int) {
		i := moved[k]
		c := conns[i]
		if results[i].err != nil {
			return
		}
		if !pages[i].More || pages[i].Next == c.Cursor {
			results[i].drained = true
			return
		}
		results[i] = a.pullFeed(ctx, tenantID, c, pullers[i], pages[i].Next, results[i])
	})
	return results
}

// firstStored is a connector's pull once its first page is stored (ins
// what storing it inserted), its cursor left at next.
func firstStored(ins commitlayer.InsertResult, next string) connectorPull {
	out := connectorPull{ins: ins, stored: true, cursor: &next}
	if ins.NotificationID != 0 {
		out.notices = []int64{ins.NotificationID}
	}
	out.ins.NotificationID = 0
	return out
}

// pullFeed reads one connector on from cursor, after its first page (out:
// what that page stored), until the feed has no more pages or the pull has
// read MaxPagesPerPull of them, storing each page with its cursor. It
// returns out with what the pages stored, the outbox notices they wrote
// (for Extract to delete once it has delivered them), and whether it read
// the feed to its end.
func (a *Activities) pullFeed(ctx context.Context, tenantID string, c commitlayer.Connector, puller pull.Puller, cursor string, out connectorPull) connectorPull {
	maxPages := a.MaxPagesPerPull
	if maxPages <= 0 {
		maxPages = 100
	}
	subjects := map[commitlayer.Subject]bool{}
	for _, s := range out.ins.Subjects {
		subjects[s] = true
	}
	var digest digestSum
	digest.add(out.ins)
	for range maxPages - 1 {
		if heartbeats(ctx) {
			activity.RecordHeartbeat(ctx, c.Source)
		}
		page, err := puller.Pull(ctx, c.Source, cursor)
		if err != nil {
			return connectorPull{notices: out.notices, stored: out.stored, err: fmt.Errorf("pull %s: %w", c.Source, err)}
		}
		ins, err := a.Store.RecordPull(ctx, tenantID, c.ID, page.Facts, page.Next, a.now())
		if err != nil {
			// A failed transaction stored nothing, but the database
			// failing fails the whole pull anyway.
			return connectorPull{notices: out.notices, stored: out.stored, err: pageStoreError(c, err)}
		}
		out.ins.Inserted += ins.Inserted
		out.ins.Duplicates += ins.Duplicates
		digest.add(ins)
		if ins.NotificationID != 0 {
			out.notices = append(out.notices, ins.NotificationID)
		}
		for _, s := range ins.Subjects {
			subjects[s] = true
		}
		left := page.Next
		out.cursor = &left
		if !page.More || page.Next == cursor {
			out.drained = true
			break
		}
		cursor = page.Next
	}
	out.ins.Subjects = out.ins.Subjects[:0:0]
	for s := range subjects {
		out.ins.Subjects = append(out.ins.Subjects, s)
	}
	out.ins.Digest = digest.digest()
	return out
}

// parallel runs f(0) … f(n-1) at once and waits for them all.
func parallel(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}
