package main

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/worker"
)

// TestBoundedStickyCacheFinishesSleepingVerifications: a worker process
// whose sticky cache holds two workflows (COMMITLAYER_STICKY_CACHE_SIZE=2)
// finishes twelve verifications sleeping on their settlement timers at
// once, each with exactly one provisional and one final verdict, and each
// workflow completes. The cache did bound them: the worker's SDK counted a
// sticky cache miss (evicted, then replayed from the full history) for
// most of the twelve timers' wakes.
func TestBoundedStickyCacheFinishesSleepingVerifications(t *testing.T) {
	bin := commitlayerBinary(t)
	s := newStack(t, Roles{API: true}) // the API here, the worker in a process of its own
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metricsAddr := l.Addr().String()
	require.NoError(t, l.Close())
	startProcess(t, bin, map[string]string{worker.EnvStickyCacheSize: "2", "COMMITLAYER_METRICS_ADDR": metricsAddr}, "worker")

	const n = 12
	key := s.tenant()
	ids, _ := s.sleepingPayouts(key, "payout_sticky", "10s", n)
	s.requireOneProvisionalOneFinal(key, ids, 90*time.Second)
	s.requireAllClosed(key, ids)
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	misses := 0.0
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "temporal_sticky_cache_miss") {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(t, err, l)
			misses += v
		}
	}
	t.Logf("sticky cache misses: %v for %d sleeping verifications", misses, n)
	require.GreaterOrEqual(t, misses, float64(n/2), "a cache of 2 keeps at most 2 of %d sleeping verifications", n)
}
