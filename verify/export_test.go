package verify

import (
	"context"
	"time"
)

// SetNotifierClock replaces how the client's notifier waits out a
// verification's window: tests end windows when they choose.
func SetNotifierClock(c *Client, after func(time.Duration, func())) {
	c.notices().after = after
}

// SetNotifierRate replaces the client's rate of signals with wait, which
// blocks until a signal may go.
func SetNotifierRate(c *Client, wait func(ctx context.Context) error) {
	c.notices().wait = wait
}
