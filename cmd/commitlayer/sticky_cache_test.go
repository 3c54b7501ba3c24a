package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/worker"
)

// TestBoundedStickyCacheFinishesSleepingVerifications: a worker process
// whose sticky cache holds two workflows (COMMITLAYER_STICKY_CACHE_SIZE=2)
// finishes twelve verifications sleeping on their settlement timers at
// once, each with exactly one provisional and one final verdict, and each
// workflow completes. The cache did bound them: most of the twelve had a
// later workflow task scheduled on the normal task queue, not the worker's
// sticky one (evicted, then replayed from the history).
func TestBoundedStickyCacheFinishesSleepingVerifications(t *testing.T) {
	bin := commitlayerBinary(t)
	s := newStack(t, Roles{API: true}) // the API here, the worker in a process of its own
	startProcess(t, bin, map[string]string{worker.EnvStickyCacheSize: "2"}, "worker")

	const n = 12
	key := s.tenant()
	ids, _ := s.sleepingPayouts(key, "payout_sticky", "10s", n)
	var wg sync.WaitGroup
	histories := make([][]commitlayer.Verdict, n)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			histories[i] = s.waitVerdict(key, id, 90*time.Second, func(h []commitlayer.Verdict) bool {
				return len(h) >= 2 && !h[len(h)-1].Provisional
			})
		}()
	}
	wg.Wait()
	for i, h := range histories {
		require.Len(t, h, 2, "action %s: one provisional and one final verdict", ids[i])
		require.True(t, h[0].Provisional)
		require.False(t, h[1].Provisional)
		require.Equal(t, commitlayer.StatusPass, h[1].Status)
	}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			d, err := s.m.Temporal.DescribeWorkflow(context.Background(), workflowIDFor(s, key, id), "")
			if err != nil || d.WorkflowCloseTime == nil {
				return false
			}
		}
		return true
	}, 30*time.Second, 250*time.Millisecond)
	evicted := 0
	for _, id := range ids {
		tasks := 0
		for _, e := range fetchHistory(t, s, workflowIDFor(s, key, id)).GetEvents() {
			a := e.GetWorkflowTaskScheduledEventAttributes()
			if a == nil {
				continue
			}
			if tasks++; tasks > 1 && a.GetTaskQueue().GetKind() == enumspb.TASK_QUEUE_KIND_NORMAL {
				evicted++
				break
			}
		}
	}
	t.Logf("%d of %d verifications went back to the normal task queue after their first task", evicted, n)
	require.GreaterOrEqual(t, evicted, n/2, "a cache of 2 keeps at most 2 of %d sleeping verifications", n)
}
