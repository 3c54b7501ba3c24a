package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/worker"
	"golang.org/x/sync/errgroup"
)

// The bench command's baselines: Temporal's own floor on the same server,
// worker process and task queue as the verifications they are compared
// with. Registered only on the bench's workers, never on the product's.
const (
	benchNoopWorkflow  = "BenchNoop"
	benchSleepWorkflow = "BenchSleep"
)

// benchNoop does nothing: one workflow task, then complete.
func benchNoop(workflow.Context) error { return nil }

// benchSleep only waits on a durable timer for d, as a verification waits
// for its settlement window.
func benchSleep(ctx workflow.Context, d time.Duration) error { return workflow.Sleep(ctx, d) }

func registerBaselines(r sdkworker.Registry) {
	// Baselines run on the bench's product worker, as the verifications
	// they are measured against do.
	r.RegisterWorkflowWithOptions(benchNoop, workflow.RegisterOptions{Name: benchNoopWorkflow, VersioningBehavior: worker.VerifyActionBehavior})
	r.RegisterWorkflowWithOptions(benchSleep, workflow.RegisterOptions{Name: benchSleepWorkflow, VersioningBehavior: worker.VerifyActionBehavior})
}

type baselineSample struct {
	started, done time.Time
}

func (s baselineSample) latency() time.Duration { return s.done.Sub(s.started) }

func baselineRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// noopClosedLoop runs conc clients, each starting a no-op workflow and
// waiting for it to complete before starting the next.
func (b *benchmarker) noopClosedLoop(ctx context.Context, n, conc int) ([]time.Duration, error) {
	run := baselineRunID()
	out := make([]time.Duration, n)
	err := closedLoopN(ctx, n, conc, func(ctx context.Context, i int) error {
		started := time.Now()
		r, err := b.m.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("bench-noop/%s/%d", run, i), TaskQueue: b.m.Config.TaskQueue,
			EnableEagerStart: true, // as verifications are started (verify.StartOptions)
		}, benchNoopWorkflow)
		if err == nil {
			err = r.Get(ctx, nil)
		}
		if err != nil {
			return fmt.Errorf("no-op workflow %d: %w", i, err)
		}
		out[i] = time.Since(started)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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

// sleepersAtOnce starts n workflows that only sleep for window (conc starts
// in flight) and waits for all to complete: the throughput Temporal gives a
// timer-and-complete workflow on this server and worker.
func (b *benchmarker) sleepersAtOnce(ctx context.Context, n, conc int, window time.Duration) ([]baselineSample, time.Duration, error) {
	run := baselineRunID()
	samples := make([]baselineSample, n)
	sem := make(chan struct{}, conc)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	begin := time.Now()
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			started := time.Now()
			r, err := b.m.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: fmt.Sprintf("bench-sleep/%s/%d", run, i), TaskQueue: b.m.Config.TaskQueue,
				EnableEagerStart: true,
			}, benchSleepWorkflow, window)
			<-sem
			if err == nil {
				err = r.Get(ctx, nil)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("sleeping no-op %d: %w", i, err))
				return
			}
			samples[i] = baselineSample{started: started, done: time.Now()}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, 0, errs[0]
	}
	return samples, time.Since(begin), nil
}

// ratio renders a ÷ b to two decimals.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

func printLatencyRatios(w io.Writer, name string, got, base []time.Duration) {
	fmt.Fprintf(w, "  ratio %s ÷ no-op:  p50 %s  p99 %s\n", name, ratio(pct(got, 50), pct(base, 50)), ratio(pct(got, 99), pct(base, 99)))
}
