package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/sync/errgroup"

	"github.com/commitlayer/commitlayer/worker"
)

// The baselines: Temporal's own floor on the same server, worker process
// and task queue as the verifications they are compared with. cmd
// registers them only on the load test's workers, never on a product
// worker.
const (
	noopWorkflow  = "BenchNoop"
	sleepWorkflow = "BenchSleep"
)

// noop does nothing: one workflow task, then complete.
func noop(workflow.Context) error { return nil }

// sleep only waits on a durable timer for d, as a verification waits for
// its settlement window.
func sleep(ctx workflow.Context, d time.Duration) error { return workflow.Sleep(ctx, d) }

// RegisterBaselines registers the baseline workflows on the load test's
// worker, beside the product's (the verifications they are measured
// against run there too), with the versioning behaviour of VerifyAction.
func RegisterBaselines(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(noop, workflow.RegisterOptions{Name: noopWorkflow, VersioningBehavior: worker.VerifyActionBehavior})
	r.RegisterWorkflowWithOptions(sleep, workflow.RegisterOptions{Name: sleepWorkflow, VersioningBehavior: worker.VerifyActionBehavior})
}

func baselineRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// noopClosedLoop runs conc clients, each starting a no-op workflow and
// waiting for it to complete before starting the next.
func noopClosedLoop(ctx context.Context, s *Stack, n, conc int) ([]time.Duration, error) {
	run := baselineRunID()
	out := make([]time.Duration, n)
	err := closedLoopN(ctx, n, conc, func(ctx context.Context, i int) error {
		started := time.Now()
		r, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("bench-noop/%s/%d", run, i), TaskQueue: s.TaskQueue,
			EnableEagerStart: true, // as verifications are started (verify.StartOptions)
		}, noopWorkflow)
		if err == nil {
			err = r.Get(ctx, nil)
		}
		if err != nil {
			return fmt.Errorf("no-op workflow %d: %w", i, err)
		}
		out[i] = time.Since(started)
		return nil
	})
	return out, err
}

// sleepersAtOnce starts n workflows that only sleep for window (conc starts
// in flight) and waits for all to complete: the throughput Temporal gives a
// timer-and-complete workflow on this server and worker. It returns each
// one's start → complete and the wall time of all.
func sleepersAtOnce(ctx context.Context, s *Stack, n, conc int, window time.Duration) ([]time.Duration, time.Duration, error) {
	run := baselineRunID()
	out := make([]time.Duration, n)
	begin := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	starts := make(chan struct{}, conc) // starts in flight; the waits are not bounded
	for i := range n {
		starts <- struct{}{}
		g.Go(func() error {
			started := time.Now()
			r, err := s.Temporal.ExecuteWorkflow(gctx, client.StartWorkflowOptions{
				ID: fmt.Sprintf("bench-sleep/%s/%d", run, i), TaskQueue: s.TaskQueue, EnableEagerStart: true,
			}, sleepWorkflow, window)
			<-starts
			if err == nil {
				err = r.Get(gctx, nil)
			}
			if err != nil {
				return fmt.Errorf("sleeping no-op %d: %w", i, err)
			}
			out[i] = time.Since(started)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	return out, time.Since(begin), nil
}

// closedLoopN runs fn for 0..n-1 with at most conc at a time (conc clients
// in a closed loop), stopping at the first error, which it returns.
func closedLoopN(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(conc, 1))
	for i := range n {
		if ctx.Err() != nil {
			break // an earlier call failed
		}
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}
