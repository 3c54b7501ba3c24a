package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
)

// A record the API did not take (down, slow, 5xx, 429) is owed: kept in
// memory, bounded in count and bytes, and posted again under the same
// Idempotency-Key until the API takes it or refuses it with a 4xx; the
// agent is not kept waiting for that (docs/recording.md, "CommitLayer").

const (
	retryMin        = time.Second
	retryMax        = time.Minute
	maxPending      = 10000
	maxPendingBytes = 64 << 20
	flushOnClose    = 5 * time.Second
)

// owed is one record to post: the action under chainKey, or (attempt) the
// attempt key of the chain's action.
type owed struct {
	action   commitlayer.Action
	chainKey string
	key      string
	entry    json.RawMessage
	attempt  bool
	size     int
	tries    int
	next     time.Time
}

// owe queues a record the API did not take.
func (g *Gateway) owe(o *owed, err error) {
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	if _, ok := g.pending[o.key]; ok {
		return
	}
	b, _ := json.Marshal(o.action)
	o.size = len(b) + len(o.entry) + len(o.key) + len(o.chainKey)
	if len(g.pending) >= maxPending || g.pendBytes+o.size > maxPendingBytes {
		g.log.Error("mcp gateway: call not recorded: too many records waiting for CommitLayer",
			"contract", o.action.Contract, "subject", string(o.action.Subject), "idempotency_key", o.key, "error", err)
		return
	}
	o.tries, o.next = 1, time.Now().Add(retryMin)
	g.pending[o.key] = o
	g.pendBytes += o.size
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Pending is how many recorded calls CommitLayer has not taken yet.
func (g *Gateway) Pending() int {
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	return len(g.pending)
}

// permanent tells an error the API will answer again whatever the retry
// (a 4xx other than 408 and 429).
func permanent(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 &&
		ae.StatusCode != http.StatusRequestTimeout && ae.StatusCode != http.StatusTooManyRequests
}

// retryLoop posts owed records when their time comes, until Close.
func (g *Gateway) retryLoop() {
	defer g.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := g.retryDue(context.Background(), false)
		if next.IsZero() {
			next = time.Now().Add(time.Hour)
		}
		t.Reset(time.Until(next))
		select {
		case <-g.done:
			ctx, cancel := context.WithTimeout(context.Background(), flushOnClose)
			g.retryDue(ctx, true)
			cancel()
			g.pendMu.Lock()
			for _, o := range g.pending {
				g.log.Error("mcp gateway: call not recorded: CommitLayer did not take it before the gateway stopped",
					"contract", o.action.Contract, "subject", string(o.action.Subject), "agent", o.action.Agent,
					"idempotency_key", o.key, "attempts", o.tries)
			}
			g.pendMu.Unlock()
			return
		case <-g.kick:
		case <-t.C:
		}
	}
}

// retryDue posts the owed records due (all with force), actions before
// attempts, and returns when the next one is due (zero: none).
func (g *Gateway) retryDue(ctx context.Context, force bool) time.Time {
	now := time.Now()
	g.pendMu.Lock()
	var due []*owed
	for _, o := range g.pending {
		if force || !o.next.After(now) {
			due = append(due, o)
		}
	}
	g.pendMu.Unlock()
	for _, attempts := range []bool{false, true} {
		for _, o := range due {
			if ctx.Err() != nil || o.attempt != attempts {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			acc, err := g.post(rctx, o, false)
			cancel()
			g.pendMu.Lock()
			switch {
			case err == nil:
				g.log.Info("mcp gateway: recorded after retries", "contract", o.action.Contract,
					"subject", string(o.action.Subject), "action", acc.ID, "attempts", o.tries+1)
			case permanent(err):
				g.log.Error("mcp gateway: call not recorded: CommitLayer refused it", "contract", o.action.Contract,
					"subject", string(o.action.Subject), "idempotency_key", o.key, "error", err)
			default:
				o.tries++
				o.next = time.Now().Add(min(retryMin<<min(o.tries, 16), retryMax))
				g.pendMu.Unlock()
				continue
			}
			delete(g.pending, o.key)
			g.pendBytes -= o.size
			g.pendMu.Unlock()
		}
	}
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	var next time.Time
	for _, o := range g.pending {
		if next.IsZero() || o.next.Before(next) {
			next = o.next
		}
	}
	return next
}
