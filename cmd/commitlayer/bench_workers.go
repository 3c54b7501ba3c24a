package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

// Extra worker processes for `bench … -workers N`: N-1 children running
// `commitlayer bench worker` on the bench's task queue (the environment the
// bench set up is theirs too), so verifications and baselines spread over
// N worker processes.

var (
	benchChildMu   sync.Mutex
	benchChildPIDs []int
)

// benchChildren lists the bench's worker processes, for the CPU figures.
func benchChildren() []int {
	benchChildMu.Lock()
	defer benchChildMu.Unlock()
	return append([]int(nil), benchChildPIDs...)
}

// benchWorker is `commitlayer bench worker`: a worker with the baselines
// registered, until it is signalled.
func benchWorker(ctx context.Context, logger *slog.Logger) int {
	roles := Roles{Worker: true}
	cfg, err := ConfigFromEnv(roles)
	if err != nil {
		logger.Error("bench worker", "error", err)
		return 1
	}
	m := &Main{Config: cfg, Logger: quiet(logger), RegisterMore: registerBaselines}
	m.WorkerOptions.MaxConcurrentActivities = 200
	if err := m.Open(ctx, roles); err != nil {
		m.Close()
		logger.Error("bench worker", "error", err)
		return 1
	}
	defer m.Close()
	if err := m.Wait(ctx); err != nil && ctx.Err() == nil {
		logger.Error("bench worker", "error", err)
		return 1
	}
	return 0
}

// startWorkers starts n-1 worker processes and waits until n workers poll
// the bench's task queue.
func (b *benchmarker) startWorkers(ctx context.Context, n int) error {
	b.workers = n
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this executable: %w", err)
	}
	for range n - 1 {
		cmd := exec.Command(exe, "bench", "worker")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start a worker process: %w", err)
		}
		b.children = append(b.children, cmd)
		benchChildMu.Lock()
		benchChildPIDs = append(benchChildPIDs, cmd.Process.Pid)
		benchChildMu.Unlock()
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := b.m.Temporal.DescribeTaskQueue(ctx, b.m.Config.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			return fmt.Errorf("describe task queue: %w", err)
		}
		ids := map[string]bool{}
		for _, p := range resp.GetPollers() {
			ids[p.GetIdentity()] = true
		}
		if len(ids) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d workers poll %s after a minute", len(ids), n, b.m.Config.TaskQueue)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopWorkers signals the worker processes and waits for them.
func (b *benchmarker) stopWorkers() {
	for _, c := range b.children {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range b.children {
		_ = c.Wait()
	}
	b.children = nil
}

func (b *benchmarker) workersDesc() string {
	if b.workers <= 1 {
		return "one worker"
	}
	return fmt.Sprintf("%d worker processes", b.workers)
}
