package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Stage is how settled a verdict must be for WaitForVerdict to return it.
type Stage string

const (
	// Provisional: any verdict, the first one included (it may change
	// before the action settles).
	Provisional Stage = "provisional"
	// Final: a verdict that is not provisional (the action has settled).
	Final Stage = "final"
)

// reached reports whether v satisfies the stage.
func (s Stage) reached(v *commitlayer.Verdict) bool {
	return v != nil && (s == Provisional || !v.Provisional)
}

// PollPolicy paces WaitForVerdict's polling.
type PollPolicy struct {
	// Initial is the first pause between two reads; zero means 100 ms.
	Initial time.Duration
	// Max caps one pause; zero means 2 s.
	Max time.Duration
	// Factor multiplies the pause after each read; below 1 means 1.5.
	Factor float64
}

func (p PollPolicy) withDefaults() PollPolicy {
	if p.Initial <= 0 {
		p.Initial = 100 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 2 * time.Second
	}
	if p.Factor < 1 {
		p.Factor = 1.5
	}
	return p
}

// WaitForVerdict returns the action's current verdict once it reaches the
// stage: the first verdict for Provisional, the first non-provisional one
// for Final. It reads GET /v1/actions/{id} with growing pauses until then
// or until ctx ends (give ctx a deadline: a Final verdict comes after the
// contract's settlement). With WithServerWait, each read asks the server to
// hold the answer until the stage is reached (GET
// /v1/actions/{id}?wait=…&timeout=…, answered through Temporal with no
// polling on the server), so one round trip per server wait.
func (c *Client) WaitForVerdict(ctx context.Context, id string, stage Stage) (commitlayer.Verdict, error) {
	if stage != Provisional && stage != Final {
		return commitlayer.Verdict{}, fmt.Errorf("wait for verdict of %s: stage %q is neither provisional nor final", id, stage)
	}
	pause := c.poll.Initial
	for {
		var q url.Values
		if c.serverWait {
			q = waitQuery(stage, c.serverWaitFor(ctx))
		}
		d, err := c.getAction(ctx, id, q)
		if err != nil {
			return commitlayer.Verdict{}, fmt.Errorf("wait for %s verdict of %s: %w", stage, id, err)
		}
		if stage.reached(d.Verdict) {
			return *d.Verdict, nil
		}
		if err := c.sleep(ctx, pause); err != nil {
			return commitlayer.Verdict{}, fmt.Errorf("wait for %s verdict of %s: %w", stage, id, err)
		}
		pause = min(time.Duration(float64(pause)*c.poll.Factor), c.poll.Max)
	}
}

// RecordAndWait records an action and returns its verdict once it is at
// the stage: the gate before an agent's next irreversible step. It asks the
// server to wait (POST /v1/actions?wait=), and when the server's wait ends
// first it goes on with WaitForVerdict until ctx ends; give ctx a deadline.
// The same idempotency key is used throughout, so a retry records nothing
// new.
func (c *Client) RecordAndWait(ctx context.Context, a commitlayer.Action, stage Stage, opts ...RecordOptions) (Accepted, commitlayer.Verdict, error) {
	var o RecordOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Wait = stage
	if o.WaitTimeout == 0 {
		o.WaitTimeout = c.serverWaitFor(ctx)
	}
	acc, err := c.RecordAction(ctx, a, o)
	if err != nil {
		return acc, commitlayer.Verdict{}, err
	}
	if acc.Verdict != nil && stage.reached(acc.Verdict) {
		return acc, *acc.Verdict, nil
	}
	v, err := c.WaitForVerdict(ctx, acc.ID, stage)
	return acc, v, err
}

// Server-side waits: the server takes at most maxServerWait, and a wait
// ends serverWaitMargin before the caller's deadline or the http.Client's
// timeout so the answer still arrives.
const (
	maxServerWait    = 60 * time.Second
	defaultWait      = 20 * time.Second
	serverWaitMargin = 2 * time.Second
	minServerWait    = time.Second
)

// serverWaitFor is how long to ask the server to wait: its default, less
// when ctx's deadline or the http.Client's timeout is nearer.
func (c *Client) serverWaitFor(ctx context.Context) time.Duration {
	d := defaultWait
	if t := c.http.Timeout; t > 0 {
		d = min(d, t-serverWaitMargin)
	}
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-serverWaitMargin)
	}
	return min(max(d, minServerWait), maxServerWait)
}

// waitQuery is ?wait=stage&timeout=seconds.
func waitQuery(stage Stage, timeout time.Duration) url.Values {
	q := url.Values{"wait": {string(stage)}}
	if timeout > 0 {
		q.Set("timeout", strconv.FormatFloat(min(timeout, maxServerWait).Seconds(), 'f', -1, 64))
	}
	return q
}
