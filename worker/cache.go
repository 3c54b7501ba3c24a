package worker

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	sdkworker "go.temporal.io/sdk/worker"
)

// EnvStickyCacheSize names the environment variable that bounds the
// workflows a worker process keeps in memory between their workflow tasks
// (Temporal's sticky workflow cache).
const EnvStickyCacheSize = "COMMITLAYER_STICKY_CACHE_SIZE"

// DefaultStickyCacheSize is the bound CommitLayer's workers keep unless
// COMMITLAYER_STICKY_CACHE_SIZE says otherwise: the SDK's own (10 000).
// Each cached verification holds ~37 KiB of heap and a goroutine
// (docs/benchmarks.md, "Cost as it grows"), so with it a worker's memory
// grows with the verifications that watch. A smaller bound keeps memory
// flat (heap 14.3 → 22.3 MiB from 10 to 1 010 watching at 128, against
// 14.9 → 78.3 MiB at 2 010 with the SDK's), but measured on the dev
// server it made a burst of signals slow to wake its verifications: each
// wake of an evicted one is a cache miss (a history fetch and a replay),
// and the tasks queued behind them timed out on the sticky queue. Until
// that is measured on a real cluster the default stays the SDK's.
const DefaultStickyCacheSize = 10_000

// StickyCacheSizeFromEnv reads COMMITLAYER_STICKY_CACHE_SIZE: a positive
// number of workflows, or DefaultStickyCacheSize when unset.
func StickyCacheSizeFromEnv() (int, error) {
	v := strings.TrimSpace(os.Getenv(EnvStickyCacheSize))
	if v == "" {
		return DefaultStickyCacheSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s must be a positive number of workflows, got %q", EnvStickyCacheSize, v)
	}
	return n, nil
}

var stickyOnce sync.Once

// SetStickyCacheSize bounds the sticky workflow cache of every worker of
// this process. The SDK allows it once, before the first worker starts:
// calls after the first are ignored (one process, one bound).
func SetStickyCacheSize(n int) {
	stickyOnce.Do(func() { sdkworker.SetStickyWorkflowCacheSize(n) })
}
