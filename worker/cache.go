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
// COMMITLAYER_STICKY_CACHE_SIZE says otherwise. The SDK's own default
// (10 000) keeps every sleeping verification of a busy tenant in memory,
// ~37 KiB of heap and a goroutine each (docs/benchmarks.md, "Cost as it
// grows"): a worker's memory then grows with the verifications that
// watch, not with the work being done. A verification evicted from the
// cache is replayed from its history at its next workflow task (a watch
// sleeps on one timer: its history is a few dozen events), which costs
// that task a history fetch and a replay of well under a millisecond of
// CPU. 128 covers what a worker works on at once (its concurrent workflow
// tasks, and the verifications started a moment ago that are about to
// take their next step).
const DefaultStickyCacheSize = 128

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
