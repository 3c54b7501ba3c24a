package loadtest

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"os/exec"

	enumspb "go.temporal.io/api/enums/v1"
)

// workers are the worker processes polling the load test's queue: this
// one and the children started for -workers N (each `commitlayer bench
// worker` with the same settings), so verifications and baselines spread
// over N processes.
type workers struct {
	n        int
	mu       sync.Mutex
	children []*exec.Cmd
}

// startWorkers starts n-1 worker processes and waits until n workers poll
// the queue. The workers returned are to be stopped, error or not.
func startWorkers(ctx context.Context, s *Stack, n int) (*workers, error) {
	ws := &workers{n: n}
	for range n - 1 {
		cmd := s.WorkerCommand()
		if err := cmd.Start(); err != nil {
			return ws, fmt.Errorf("start a worker process: %w", err)
		}
		ws.mu.Lock()
		ws.children = append(ws.children, cmd)
		ws.mu.Unlock()
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := s.Temporal.DescribeTaskQueue(ctx, s.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			return ws, fmt.Errorf("describe task queue: %w", err)
		}
		ids := map[string]bool{}
		for _, p := range resp.GetPollers() {
			ids[p.GetIdentity()] = true
		}
		if len(ids) >= n {
			return ws, nil
		}
		if time.Now().After(deadline) {
			return ws, fmt.Errorf("%d of %d workers poll %s after a minute", len(ids), n, s.TaskQueue)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pids are the children's process ids, for the CPU figures.
func (ws *workers) pids() []int {
	if ws == nil {
		return nil
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []int
	for _, c := range ws.children {
		out = append(out, c.Process.Pid)
	}
	return out
}

// stop signals the worker processes and waits for them.
func (ws *workers) stop() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, c := range ws.children {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range ws.children {
		_ = c.Wait()
	}
	ws.children = nil
}

func (ws *workers) String() string {
	if ws.n <= 1 {
		return "one worker"
	}
	return fmt.Sprintf("%d worker processes", ws.n)
}
