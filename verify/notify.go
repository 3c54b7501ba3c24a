package verify

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"golang.org/x/time/rate"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/workflows"
)

// The notifier coalesces the facts-arrived signals of a process: it holds a
// pending notice per verification (workflow id) and sends each pending one
// once, with at most a bounded number of signals in flight. A burst of
// notices on one verification — the facts of many batches on its subject,
// arriving close together — costs it one signal while it waits its turn and
// one more if a notice came in while that signal was in flight (a pass may
// have read before those facts were stored, so that one is not dropped; it
// is sent once the signal in flight has been delivered). Every caller waits
// until a signal sent after its call began has been delivered: delivered
// means the verification will run a pass that reads the facts the caller
// stored before calling, which is what lets the outbox row go.
//
// Wakes can be paced two ways (both off unless the client asks), so that
// a storm of them does not take the machine from ingest: with a window a
// verification gets at most one signal per window
// (the notices that come within it after a signal share the next one, sent
// when the window ends), and with a rate the process sends at most that
// many signals a second (the others wait their turn in the queue; the
// POSTs that stored their facts have answered already, and past the API's
// bound their notices wait in the outbox for the reconciler).
type notifier struct {
	mu      sync.Mutex
	pending map[string]*notice // by workflow id
	queue   []string           // ids with a wave waiting to be sent, in order
	running int                // senders at work
	limit   int
	send    func(ctx context.Context, t target) error

	window time.Duration                   // least time between two signals to one verification
	after  func(time.Duration, func())     // runs f after d (time.AfterFunc; tests replace it)
	wait   func(ctx context.Context) error // blocks until the rate allows a signal; nil: no rate

	sent, coalesced, held, screened atomic.Int64
}

// notice is one verification's state: a wave in flight (sent, not yet
// answered) and the next wave, which callers join until it is sent.
type notice struct {
	target   target // whom the signals go to
	inFlight bool
	// held: a signal went less than a window ago; the next wave waits for
	// the window's end.
	held bool
	next *wave
}

// wave is one signal's delivery, awaited by every call that joined it.
type wave struct {
	done chan struct{}
	err  error
}

// signalTimeout bounds one signal of the notifier.
const signalTimeout = 5 * time.Second

// target is a verification a notice goes to: its workflow and the action
// it verifies (a signal-with-start needs its start).
type target struct {
	workflowID string
	tenantID   string
	action     commitlayer.ActionRecord
}

func newNotifier(limit int, window time.Duration, perSecond float64, send func(ctx context.Context, t target) error) *notifier {
	if limit <= 0 {
		limit = defaultSignalConcurrency
	}
	n := &notifier{pending: map[string]*notice{}, limit: limit, send: send, window: window,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
	if perSecond > 0 {
		l := rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/10)))
		n.wait = l.Wait
	}
	return n
}

// defaultSignalConcurrency bounds the signals a process has in flight.
const defaultSignalConcurrency = 32

// notify queues a signal to each target (coalesced with one not yet
// sent) and waits until every one has been delivered, or ctx ends. A
// workflow that has ended is not an error (send answers nil for it).
func (n *notifier) notify(ctx context.Context, targets []target) error {
	waves := make([]*wave, 0, len(targets))
	n.mu.Lock()
	for _, t := range targets {
		id := t.workflowID
		p := n.pending[id]
		if p == nil {
			p = &notice{target: t}
			n.pending[id] = p
		}
		if p.next != nil {
			n.coalesced.Add(1)
			waves = append(waves, p.next)
			continue
		}
		p.next = &wave{done: make(chan struct{})}
		waves = append(waves, p.next)
		switch {
		case p.held: // sent when the window ends
		case !p.inFlight: // else queued when the one in flight is answered
			n.queue = append(n.queue, id)
		}
	}
	n.startSenders()
	n.mu.Unlock()
	var errs []error
	for _, w := range waves {
		select {
		case <-w.done:
			if w.err != nil {
				errs = append(errs, w.err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return joinFirst(errs)
}

// startSenders starts senders for the queue, up to the limit; n.mu held.
func (n *notifier) startSenders() {
	for n.running < n.limit && n.running < len(n.queue) {
		n.running++
		go n.drain()
	}
}

// drain sends queued waves until the queue is empty.
func (n *notifier) drain() {
	n.mu.Lock()
	for len(n.queue) > 0 {
		id := n.queue[0]
		n.queue[0] = ""
		n.queue = n.queue[1:]
		p := n.pending[id]
		w := p.next
		p.next, p.inFlight = nil, true
		n.mu.Unlock()

		if n.wait != nil {
			// The rate's turn: at most (senders ÷ rate) away, since each
			// sender waits for one signal at a time.
			_ = n.wait(context.Background())
		}
		ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
		w.err = n.send(ctx, p.target)
		cancel()
		n.sent.Add(1)

		n.mu.Lock()
		p.inFlight = false
		switch {
		case n.window > 0:
			// The window starts: what comes now waits for its end.
			p.held = true
			n.after(n.window, func() { n.release(id) })
		case p.next != nil:
			n.queue = append(n.queue, id) // joined while in flight: goes again
		default:
			delete(n.pending, id)
		}
		// Only now are the wave's callers told: by the time a call
		// returns, its verification's window (if any) has started.
		close(w.done)
	}
	n.running--
	n.mu.Unlock()
}

// release ends a verification's window: a wave that waited for it is
// queued; a verification nobody named meanwhile is forgotten.
func (n *notifier) release(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pending[id]
	p.held = false
	if p.next == nil {
		delete(n.pending, id)
		return
	}
	n.held.Add(1)
	n.queue = append(n.queue, id)
	n.startSenders()
}

// joinFirst returns the first error and how many more there were: a
// thousand identical "Temporal away" errors say nothing more than one.
func joinFirst(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return &manyErrors{first: errs[0], more: len(errs) - 1}
}

type manyErrors struct {
	first error
	more  int
}

func (e *manyErrors) Error() string {
	return e.first.Error() + " (and " + strconv.Itoa(e.more) + " more signals failed)"
}

func (e *manyErrors) Unwrap() error { return e.first }

// NoticeStats counts this client's facts-arrived signals: Sent went out,
// Coalesced were asked for while one to the same verification was still
// waiting its turn (they cost no signal), Held were signals that waited
// for the end of their verification's window, Screened were verifications
// the facts reached but could not change (Client.Screen), not woken.
type NoticeStats struct {
	Sent, Coalesced, Held, Screened int64
}

// NoticeStats returns the counts so far.
func (c *Client) NoticeStats() NoticeStats {
	n := c.notices()
	return NoticeStats{Sent: n.sent.Load(), Coalesced: n.coalesced.Load(), Held: n.held.Load(), Screened: n.screened.Load()}
}

func (c *Client) notices() *notifier {
	c.notifyOnce.Do(func() {
		c.notifier = newNotifier(c.SignalConcurrency, max(c.SignalWindow, 0), c.SignalRate, c.wake)
	})
	return c.notifier
}

// wake delivers a new-facts notice to one verification. One that may be
// asleep outside the worker (workflows/dormant.go) gets it by
// signal-with-start, which wakes it; Temporal refuses to start a closed
// one again (reject-duplicate), and a verification that never started is
// started, with the options the reconciler would have used. A younger one,
// which cannot be asleep, gets a plain signal: it may not be started yet
// by whoever starts it (the API's eager start, a parent workflow), and a
// signal-with-start would start it first.
func (c *Client) wake(ctx context.Context, t target) error {
	var err error
	if c.mayBeAsleep(t.action, time.Now()) {
		opts := StartOptions(c.taskQueue(), t.tenantID, t.action)
		opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
		opts.EnableEagerStart = false
		_, err = c.Temporal.SignalWithStartWorkflow(ctx, t.workflowID, workflows.SignalFactsArrived,
			workflows.FactsArrived{}, opts, workflows.VerifyAction, c.input(t.tenantID, t.action))
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil // closed: its watch is over
		}
	} else {
		err = c.Temporal.SignalWorkflow(ctx, t.workflowID, "", workflows.SignalFactsArrived,
			workflows.FactsArrived{}) // no subject list: the pass re-reads them all
	}
	if err != nil && isNotRunning(err) {
		return nil
	}
	if err != nil {
		return &signalError{workflowID: t.workflowID, err: err}
	}
	return nil
}

// mayBeAsleep reports whether the verification of a may be asleep at now,
// for all this client knows: this client starts sleeping verifications,
// and a's record is older than the age from which they may sleep (less a
// margin, Dormancy.WakeByStart).
func (c *Client) mayBeAsleep(a commitlayer.ActionRecord, now time.Time) bool {
	return c.Dormancy.Enabled() && now.Sub(a.CreatedAt) >= c.Dormancy.WakeByStart()
}

type signalError struct {
	workflowID string
	err        error
}

func (e *signalError) Error() string { return "signal " + e.workflowID + ": " + e.err.Error() }
func (e *signalError) Unwrap() error { return e.err }
