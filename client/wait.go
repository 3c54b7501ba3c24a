package client

import (
	"context"
	"fmt"
	"net/url"
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
	if v == nil {
		return false
	}
	return s == Provisional || !v.Provisional
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
// hold the answer until the stage is reached, so a server that supports it
// answers in one round trip.
func (c *Client) WaitForVerdict(ctx context.Context, id string, stage Stage) (commitlayer.Verdict, error) {
	if stage != Provisional && stage != Final {
		return commitlayer.Verdict{}, fmt.Errorf("wait for verdict of %s: stage %q is neither provisional nor final", id, stage)
	}
	var q url.Values
	if c.serverWait {
		q = url.Values{"wait": {string(stage)}}
	}
	pause := c.poll.Initial
	for {
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
