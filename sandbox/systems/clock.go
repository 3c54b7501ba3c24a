package systems

import (
	"sync"
	"time"
)

// Clock is an enterprise's virtual clock. It stands still between writes and
// advances exactly one second per committed write; every event's occurred_at
// comes from it. One Clock is shared by the seven systems of an enterprise.
type Clock struct {
	mu    sync.Mutex
	start time.Time
	now   time.Time
}

// NewClock returns a clock that started at start and now reads now. Both are
// truncated to the second and kept in UTC.
func NewClock(start, now time.Time) *Clock {
	return &Clock{start: start.UTC().Truncate(time.Second), now: now.UTC().Truncate(time.Second)}
}

// Start is the virtual time at the enterprise's creation.
func (c *Clock) Start() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start
}

// Now is the virtual time of the last committed write (Start when none).
// A write made after Now was read is stamped strictly later.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// tick advances the clock by one second and returns the new time.
func (c *Clock) tick() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}
