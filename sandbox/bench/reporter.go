package bench

import (
	"context"
	"errors"
	"log/slog"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer/activities"
	commitworker "github.com/commitlayer/commitlayer/worker"
)

// Scenarios finds the Scenario workflow a tenant's enterprise belongs to
// (harness.Host).
type Scenarios interface {
	ScenarioWorkflow(tenantID string) (string, bool)
}

// Reporter is the benchmark's wiring of the product's verification pass:
// it runs activities.Activities.Pass and, when the pass produced a final
// verdict, tells the tenant's Scenario workflow (SignalVerdictPublished),
// which waits for it before it reads the oracle. The product's
// VerifyAction knows nothing of it.
type Reporter struct {
	Activities *activities.Activities
	Temporal   client.Client
	Scenarios  Scenarios
	Logger     *slog.Logger
}

// Pass runs the product's pass, then reports a final verdict.
func (r *Reporter) Pass(ctx context.Context, in activities.PassInput) (activities.PassResult, error) {
	res, err := r.Activities.Pass(ctx, in)
	if err != nil {
		return res, err
	}
	v := res.Evaluate.Verdict
	if v.Provisional || v.Version == 0 {
		return res, nil
	}
	wfID, ok := r.Scenarios.ScenarioWorkflow(in.Evaluate.TenantID)
	if !ok {
		return res, nil // not a scenario of this process (or it is over)
	}
	// The verdict is stored whatever happens to the signal: a scenario that
	// has ended, or a Temporal briefly away, costs the pass nothing.
	if err := r.Temporal.SignalWorkflow(ctx, wfID, "", SignalVerdictPublished, v); err != nil {
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) && r.Logger != nil {
			r.Logger.Warn("report verdict to scenario", "scenario", wfID, "action", v.ActionID, "error", err)
		}
	}
	return res, nil
}

// RegisterVerifications registers, on a benchmark worker, the product's
// VerifyAction (pinned, see Behavior) with the activities it runs wired for
// the sandbox: acts for every step, and the Reporter's Pass in place of
// the product's.
func RegisterVerifications(w sdkworker.Worker, acts *activities.Activities, rep *Reporter) {
	commitworker.RegisterVerifyAction(w, Behavior)
	w.RegisterActivity(acts)
	w.RegisterActivityWithOptions(rep.Pass, activity.RegisterOptions{Name: passActivity, DisableAlreadyRegisteredCheck: true})
}

// passActivity is the registered name of activities.Activities.Pass.
const passActivity = "Pass"
