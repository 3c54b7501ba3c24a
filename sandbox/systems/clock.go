package systems

import (
	"sync"
	"time"
)

// Clock is an enterprise's virtual clock. Writes are stamped on whole
// seconds: the n-th committed write at Start + n s, and every event of that
// write carries its time. Between writes the clock stands still half a
// second after the last one, so a time read from Now is strictly after every
// event so far and strictly before every event to come: an action recorded
// at Now() never coincides with an event. One Clock is shared by the seven
// systems of an enterprise.
type Clock struct {
	// wmu is held by a write from the moment it takes its time until it
	// commits or rolls back, so a write that does not commit does not use
	// up a second and times follow commit order across the seven systems.
	wmu   sync.Mutex
	mu    sync.Mutex
	start time.Time
	last  time.Time // the last write's time (start when none)
}

// Between is how far Now stands after the last write.
const Between = 500 * time.Millisecond

// NewClock returns a clock that started at start and whose last write was at
// last. Both are truncated to the second and kept in UTC.
func NewClock(start, last time.Time) *Clock {
	return &Clock{start: start.UTC().Truncate(time.Second), last: last.UTC().Truncate(time.Second)}
}

// Start is the virtual time at the enterprise's creation.
func (c *Clock) Start() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start
}

// Now is the virtual time now: Between after the last write (or after
// Start when there was none).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last.Add(Between)
}

// Last is the time of the last committed write (Start when none).
func (c *Clock) Last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// reserve takes the write lock and returns the next write's time; the
// caller ends with advance (committed) or release (not).
func (c *Clock) reserve() time.Time {
	c.wmu.Lock()
	return c.Last().Add(time.Second)
}

// advance records the reserved time as the last write's and frees the write
// lock.
func (c *Clock) advance(at time.Time) {
	c.mu.Lock()
	c.last = at
	c.mu.Unlock()
	c.wmu.Unlock()
}

// release frees the write lock without advancing.
func (c *Clock) release() { c.wmu.Unlock() }
