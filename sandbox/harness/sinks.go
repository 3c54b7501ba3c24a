package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/report"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
)

// SinksInput asks for a finished run to be logged to experiment platforms
// (braintrust, langsmith). Names only: the keys are read from this
// process's environment.
type SinksInput struct {
	RunID string
	Sinks []string
}

// sinksTimeout bounds one delivery; what did not arrive by then is
// reported on the run.
const sinksTimeout = 2 * time.Minute

// DeliverSinks logs a finished run (read from the store) as one experiment
// on each named sink and notes on the run's log tail what arrived. A sink
// that is down, refuses or has no key is reported, never a failed run: it
// returns an error only when the run cannot be read or updated.
func (a *Activities) DeliverSinks(ctx context.Context, in SinksInput) (string, error) {
	run, err := a.Store.GetBenchmarkRun(ctx, in.RunID)
	if err != nil {
		if errors.Is(err, commitlayer.ErrNotFound) {
			return "", nil // a run without a stored row keeps no bookkeeping
		}
		return "", fmt.Errorf("load run %s: %w", in.RunID, err)
	}
	var b strings.Builder
	getenv := a.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ss, err := sinks.FromEnv(in.Sinks, getenv, a.logger())
	if err != nil {
		fmt.Fprintf(&b, "sinks: nothing delivered: %v\n", err)
	} else {
		rows, err := RecordedRows(run.Results)
		if err != nil {
			return "", fmt.Errorf("run %s: %w", in.RunID, err)
		}
		res := report.NewResults("", run.StartedAt, run.FinishedAt, 0, rows)
		res.ID = in.RunID
		dctx, cancel := context.WithTimeout(ctx, sinksTimeout)
		for _, rep := range sinks.DeliverAll(dctx, ss, res, res.Scenarios) {
			status := "all arrived"
			if !rep.OK() {
				status = fmt.Sprintf("%d did not arrive", rep.Missing())
			}
			fmt.Fprintf(&b, "sink %s (%s)\n", rep, status)
		}
		cancel()
	}
	run.LogTail += b.String()
	if err := a.Store.UpdateBenchmarkRun(ctx, run); err != nil {
		return "", fmt.Errorf("update run %s: %w", in.RunID, err)
	}
	return b.String(), nil
}
