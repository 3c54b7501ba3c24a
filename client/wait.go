package client

import (
	"cmp"
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
	Provisional Stage = "provisional" // any verdict (it may change before the action settles)
	Final       Stage = "final"       // a verdict that is not provisional
)

func (s Stage) reached(v *commitlayer.Verdict) bool {
	return v != nil && (s == Provisional || !v.Provisional)
}

// PollPolicy paces WaitForVerdict's polling.
type PollPolicy struct {
	Initial time.Duration // the first pause; zero means 100 ms
	Max     time.Duration // caps one pause; zero means 2 s
	Factor  float64       // multiplies the pause after each read; below 1 means 1.5
}

func (p PollPolicy) withDefaults() PollPolicy {
	p.Initial = cmp.Or(max(p.Initial, 0), 100*time.Millisecond)
	p.Max = cmp.Or(max(p.Max, 0), 2*time.Second)
	if p.Factor < 1 {
		p.Factor = 1.5
	}
	return p
}

// WaitForVerdict polls the action until its verdict reaches the stage or
// ctx ends (give ctx a deadline: a Final verdict comes after settlement).
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

// RecordAndWait records an action and returns its verdict once at the
// stage, the gate before an agent's next irreversible step; the server
// waits first, then WaitForVerdict until ctx ends.
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

// A server wait ends serverWaitMargin before the caller's deadline or the
// http.Client's timeout, so the answer still arrives.
const (
	maxServerWait    = 60 * time.Second
	defaultWait      = 20 * time.Second
	serverWaitMargin = 2 * time.Second
	minServerWait    = time.Second
)

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

func waitQuery(stage Stage, timeout time.Duration) url.Values {
	q := url.Values{"wait": {string(stage)}}
	if timeout > 0 {
		q.Set("timeout", strconv.FormatFloat(min(timeout, maxServerWait).Seconds(), 'f', -1, 64))
	}
	return q
}
