package activities

import (
	"context"
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
// A pass that pulls reads its action beside the pull (a pull changes no
// action): one round trip fewer after it.
func (a *Activities) Pass(ctx context.Context, in PassInput) (PassResult, error) {
	if !in.Pull || in.Evaluate.TenantID == "" || in.Evaluate.ActionID == "" {
		return PassWith(ctx, in, a.Extract, a.Evaluate)
	}
	type read struct {
		act commitlayer.ActionRecord
		err error
	}
	got := make(chan read, 1)
	go func() {
		act, err := a.Store.GetAction(ctx, in.Evaluate.TenantID, in.Evaluate.ActionID)
		got <- read{act, err}
	}()
	getAction := func() (commitlayer.ActionRecord, error) {
		r := <-got
		return r.act, r.err
	}
	return PassWith(ctx, in, a.Extract, func(ctx context.Context, ein EvaluateInput) (EvaluateResult, error) {
		return a.evaluate(ctx, ein, getAction)
	})
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
