package activities

import (
	"context"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer"
)

// PassInput asks for one whole verification pass: pull the tenant's
// connectors when Pull is set, then evaluate and store.
type PassInput struct {
	Pull     bool
	Extract  ExtractInput
	Evaluate EvaluateInput
}

// PassResult is a pass's outcome: the stored verdict and, when it pulled,
// the sources that could not be read.
type PassResult struct {
	Evaluate EvaluateResult
	// Pulled is set when the pass pulled; Unreachable is then that pull's.
	Pulled      bool
	Unreachable map[string]string `json:",omitempty"`
	// PulledAt is when the pull the pass read started (ExtractResult.StartedAt).
	PulledAt time.Time `json:",omitzero"`
}

// Pass runs Extract (when asked) and Evaluate as one activity: one local
// activity marker in the workflow's history per pass instead of two. A
// retry repeats the pull, which is idempotent (facts are unique per source
// and external id; cursors move with their facts).
//
// A pass that pulls reads beside its pull: its action at once (a pull
// changes no action), and what the evaluation reads (facts, actions,
// coverage, the latest verdict: readPass) as soon as the pull has listed
// the connectors, unless it is the verification's first pass (Known 0),
// whose pull most often brings the agent's effects. When the pull then
// stores nothing (every feed had nothing new: the settlement re-read of a
// quiet tenant) that read is the one the pass would have made after it,
// and the pass evaluates on it; otherwise it reads again. One round trip
// fewer after the feeds answer.
func (a *Activities) Pass(ctx context.Context, in PassInput) (PassResult, error) {
	if !in.Pull || in.Evaluate.TenantID == "" || in.Evaluate.ActionID == "" {
		return PassWith(ctx, in, a.Extract, a.Evaluate)
	}
	getAction := readAhead(func() (commitlayer.ActionRecord, error) {
		return a.Store.GetAction(ctx, in.Evaluate.TenantID, in.Evaluate.ActionID)
	})
	early := newEarlyRead()
	pullCtx := ctx
	if in.Evaluate.Known > 0 {
		// A re-read. (A verification's first pass reads only after its
		// pull, which most often brings the effects the agent just caused:
		// a read beside it would be read again.)
		pullCtx = withListedHook(ctx, func() {
			early.start(func() (*prefetched, *passRead, error) {
				act, err := getAction()
				if err != nil {
					return nil, nil, err
				}
				c, err := a.contract(ctx, in.Evaluate.TenantID, act.Contract, act.ContractVersion)
				if err != nil {
					return nil, nil, err
				}
				return a.readPass(ctx, in.Evaluate, act, c)
			})
		})
	}
	var quiet bool
	extract := func(_ context.Context, ein ExtractInput) (ExtractResult, error) {
		ex, err := a.Extract(pullCtx, ein)
		quiet = err == nil && ex.quiet
		return ex, err
	}
	return PassWith(ctx, in, extract, func(ctx context.Context, ein EvaluateInput) (EvaluateResult, error) {
		reads := passReads{getAction: getAction}
		if quiet {
			reads.early = early
		} else {
			early.close()
		}
		return a.evaluate(ctx, ein, reads)
	})
}

// readAhead starts read now and returns a function that waits for its
// answer (any number of times).
func readAhead[T any](read func() (T, error)) func() (T, error) {
	var (
		v    T
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		v, err = read()
	}()
	return func() (T, error) {
		<-done
		return v, err
	}
}

// earlyRead is a pass's read started beside its pull (Pass): started at
// most once, and never after the pass closed it (took it or gave it up).
type earlyRead struct {
	mu      sync.Mutex
	started bool
	closed  bool
	done    chan struct{}
	pre     *prefetched
	read    *passRead
	err     error
}

func newEarlyRead() *earlyRead { return &earlyRead{done: make(chan struct{})} }

// start runs read in the background unless the read started or was closed.
func (e *earlyRead) start(read func() (*prefetched, *passRead, error)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return
	}
	e.started = true
	go func() {
		defer close(e.done)
		e.pre, e.read, e.err = read()
	}()
}

// take closes e and returns its read, waiting for it, when it started
// (ok), whatever its error.
func (e *earlyRead) take() (pre *prefetched, read *passRead, err error, ok bool) {
	e.mu.Lock()
	started := e.started
	e.closed = true
	e.mu.Unlock()
	if !started {
		return nil, nil, nil, false
	}
	<-e.done
	return e.pre, e.read, e.err, true
}

// close keeps a read from starting (the pass will not use it).
func (e *earlyRead) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
}

// PassWith is Pass's composition over any extract and evaluate steps: the
// pull first when asked, its unreachable sources and its duration handed to
// the evaluation, an error of either step returned as it is (a
// non-retryable one stays one). Workflow tests run it over their scripted
// steps, so they exercise the composition production runs.
func PassWith(ctx context.Context, in PassInput,
	extract func(context.Context, ExtractInput) (ExtractResult, error),
	evaluate func(context.Context, EvaluateInput) (EvaluateResult, error),
) (PassResult, error) {
	var out PassResult
	if in.Pull {
		ex, err := extract(ctx, in.Extract)
		if err != nil {
			return PassResult{}, err
		}
		out.Pulled = true
		out.Unreachable = ex.Unreachable
		out.PulledAt = ex.StartedAt
		in.Evaluate.Unreachable = ex.Unreachable
		in.Evaluate.PullTook = ex.Took
	}
	ev, err := evaluate(ctx, in.Evaluate)
	if err != nil {
		return PassResult{}, err
	}
	out.Evaluate = ev
	return out, nil
}
