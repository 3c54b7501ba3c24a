package worker

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	sdkworker "go.temporal.io/sdk/worker"
)

// EnvStickyCacheSize names the environment variable that bounds the
// workflows a worker process keeps in memory between their workflow tasks
// (Temporal's sticky workflow cache).
const EnvStickyCacheSize = "COMMITLAYER_STICKY_CACHE_SIZE"

// DefaultStickyCacheSize is the most workflows CommitLayer's workers keep
// unless COMMITLAYER_STICKY_CACHE_SIZE says otherwise: the SDK's own
// (10 000), or fewer in a process with a memory limit (see
// StickyCacheSizeFor).
//
// Each cached verification holds ~37 KiB of heap and a goroutine, ~62 KiB
// of the process's memory in all (docs/benchmarks.md, "Session 6"), so at
// 10 000 a worker whose verifications all watch holds ~600 MiB: more than
// a 512 MiB container has. An evicted verification costs its next wake a
// replay of its history: ~0.7 ms of the worker's CPU for a watching one
// (BenchmarkReplayWatchingVerification) and its history sent again, a few
// KB. Memory that is not there is an OOM kill; a replay is a millisecond.
const DefaultStickyCacheSize = 10_000

// cachedWorkflowBytes is what one cached verification takes of a worker
// process's memory (heap and its goroutine's stack), rounded up.
const cachedWorkflowBytes = 64 << 10

// minStickyCacheSize is the least bound a memory limit makes.
const minStickyCacheSize = 256

// StickyCacheSizeFor is the default bound for a process limited to limit
// bytes (0 or less: no limit): DefaultStickyCacheSize, or as many as fit
// in a quarter of the limit, at least minStickyCacheSize.
func StickyCacheSizeFor(limit int64) int {
	if limit <= 0 {
		return DefaultStickyCacheSize
	}
	return int(max(minStickyCacheSize, min(DefaultStickyCacheSize, limit/4/cachedWorkflowBytes)))
}

// StickyCacheSizeFromEnv reads COMMITLAYER_STICKY_CACHE_SIZE with getenv:
// a positive number of workflows; when unset, StickyCacheSizeFor this
// process's memory limit (GOMEMLIMIT, else its cgroup's).
func StickyCacheSizeFromEnv(getenv func(string) string) (int, error) {
	v := strings.TrimSpace(getenv(EnvStickyCacheSize))
	if v == "" {
		return StickyCacheSizeFor(memoryLimit()), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s must be a positive number of workflows, got %q", EnvStickyCacheSize, v)
	}
	return n, nil
}

// memoryLimit is the memory this process may use in bytes, or 0 when
// nothing says: GOMEMLIMIT (or debug.SetMemoryLimit), else the cgroup's
// limit (v2 memory.max, v1 memory.limit_in_bytes).
func memoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// "max" (v2) or a page-rounded MaxInt64 (v1) mean no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<50 {
			return n
		}
	}
	return 0
}

var stickyOnce sync.Once

// SetStickyCacheSize bounds the sticky workflow cache of every worker of
// this process. The SDK allows it once, before the first worker starts:
// calls after the first are ignored (one process, one bound).
func SetStickyCacheSize(n int) {
	stickyOnce.Do(func() { sdkworker.SetStickyWorkflowCacheSize(n) })
}
