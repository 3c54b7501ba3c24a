package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer"
)

// UpdateWaitVerdict returns once the verification has a verdict at the
// asked stage (WaitVerdictInput): the gate POST /v1/actions?wait= sends
// with the start (update-with-start), so a caller waits without polling.
// Payload: WaitVerdictInput; result: WaitVerdictResult.
const UpdateWaitVerdict = "wait-verdict"

// WaitVerdictInput is the payload of UpdateWaitVerdict.
type WaitVerdictInput struct {
	// Final asks for a verdict that is not provisional; otherwise the first
	// verdict answers.
	Final bool
}

// WaitVerdictResult answers UpdateWaitVerdict. Reached is false when the
// run had to end before the stage was reached (it continues as new and a
// waiter must ask again); Verdict is then the current one, possibly none
// (Version 0).
type WaitVerdictResult struct {
	Verdict commitlayer.Verdict
	Reached bool
}

// reached reports whether v is at the stage in asks for.
func (in WaitVerdictInput) reached(v commitlayer.Verdict) bool {
	return v.Version > 0 && (!in.Final || !v.Provisional)
}

// setupWait registers the UpdateWaitVerdict handler. A handler writes
// nothing to the history until an update arrives, so histories recorded
// before it existed replay unchanged (workflows/replay_test.go).
//
// The handler only awaits state the main loop changes: no timers, no
// activities. It gives up when the run is about to continue as new
// (v.closing), so a waiter never holds the run open: otherwise the main
// loop, blocked in AllHandlersFinished, could never reach the verdict the
// waiter waits for.
func (v *verification) setupWait(ctx workflow.Context) error {
	return workflow.SetUpdateHandler(ctx, UpdateWaitVerdict,
		func(ctx workflow.Context, in WaitVerdictInput) (WaitVerdictResult, error) {
			defer v.nudgeIdle()
			err := workflow.Await(ctx, func() bool { return in.reached(v.state.Verdict) || v.closing })
			return WaitVerdictResult{Verdict: v.state.Verdict, Reached: in.reached(v.state.Verdict)}, err
		})
}
