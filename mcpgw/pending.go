package mcpgw

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
)

// A bound call the gateway answered is an action it owes CommitLayer.
// When CommitLayer's API does not take it (down, slow, 5xx, 429), the
// action waits in memory and is posted again, under the same
// Idempotency-Key, until the API takes it or refuses it for good (a 4xx:
// it would never take it); the agent is not kept waiting for that. Close
// makes one last attempt and logs, with its key, every action still owed.

const (
	retryMin     = time.Second
	retryMax     = time.Minute
	maxPending   = 100000
	flushOnClose = 5 * time.Second
)

type pendingAction struct {
	action   commitlayer.Action
	key      string
	attempts int
	next     time.Time
}

// owe queues an action the API did not take.
func (g *Gateway) owe(a commitlayer.Action, key string, err error) {
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	if _, ok := g.pending[key]; ok {
		return
	}
	if len(g.pending) >= maxPending {
		g.log.Error("mcp gateway: action not recorded: too many actions waiting for CommitLayer",
			"contract", a.Contract, "subject", string(a.Subject), "idempotency_key", key, "error", err)
		return
	}
	g.pending[key] = &pendingAction{action: a, key: key, attempts: 1, next: time.Now().Add(retryMin)}
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

// retryLoop posts owed actions when their time comes, until Close.
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
			for _, p := range g.pending {
				g.log.Error("mcp gateway: action not recorded: CommitLayer did not take it before the gateway stopped",
					"contract", p.action.Contract, "subject", string(p.action.Subject), "agent", p.action.Agent,
					"idempotency_key", p.key, "attempts", p.attempts)
			}
			g.pendMu.Unlock()
			return
		case <-g.kick:
		case <-t.C:
		}
	}
}

// retryDue posts the owed actions whose time has come (all with force)
// and returns when the next one is due (zero: none).
func (g *Gateway) retryDue(ctx context.Context, force bool) time.Time {
	now := time.Now()
	g.pendMu.Lock()
	var due []*pendingAction
	for _, p := range g.pending {
		if force || !p.next.After(now) {
			due = append(due, p)
		}
	}
	g.pendMu.Unlock()
	for _, p := range due {
		if ctx.Err() != nil {
			break
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		acc, err := g.cfg.Recorder.Record(rctx, p.action, p.key, false, 0)
		cancel()
		g.pendMu.Lock()
		switch {
		case err == nil:
			delete(g.pending, p.key)
			g.log.Info("mcp gateway: action recorded after retries", "contract", p.action.Contract,
				"subject", string(p.action.Subject), "action", acc.ID, "attempts", p.attempts+1)
		case permanent(err):
			delete(g.pending, p.key)
			g.log.Error("mcp gateway: action not recorded: CommitLayer refused it", "contract", p.action.Contract,
				"subject", string(p.action.Subject), "idempotency_key", p.key, "error", err)
		default:
			p.attempts++
			p.next = time.Now().Add(min(retryMin<<min(p.attempts, 16), retryMax))
		}
		g.pendMu.Unlock()
	}
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	var next time.Time
	for _, p := range g.pending {
		if next.IsZero() || p.next.Before(next) {
			next = p.next
		}
	}
	return next
}
