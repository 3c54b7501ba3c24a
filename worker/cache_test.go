package worker_test

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/worker"
)

// TestStickyCacheSizeFor: without a memory limit the SDK's 10 000; with
// one, as many cached verifications (64 KiB each) as fit in a quarter of
// it, never fewer than 256.
func TestStickyCacheSizeFor(t *testing.T) {
	for _, c := range []struct {
		limit int64
		want  int
	}{
		{0, 10_000},
		{-1, 10_000},
		{512 << 20, 2048}, // a 512 MiB container: 128 MiB of cache
		{1 << 30, 4096},
		{4 << 30, 10_000},
		{32 << 20, 256},
	} {
		require.Equal(t, c.want, worker.StickyCacheSizeFor(c.limit), "limit %d", c.limit)
	}
}

// TestStickyCacheSizeFromEnv: a set size wins over the memory limit; a bad
// one is refused.
func TestStickyCacheSizeFromEnv(t *testing.T) {
	t.Setenv(worker.EnvStickyCacheSize, "300")
	n, err := worker.StickyCacheSizeFromEnv(os.Getenv)
	require.NoError(t, err)
	require.Equal(t, 300, n)
	t.Setenv(worker.EnvStickyCacheSize, "0")
	_, err = worker.StickyCacheSizeFromEnv(os.Getenv)
	require.ErrorContains(t, err, worker.EnvStickyCacheSize)
}

// TestStickyCacheSizeFromGOMEMLIMIT: unset, the size follows the process's
// memory limit.
func TestStickyCacheSizeFromGOMEMLIMIT(t *testing.T) {
	t.Setenv(worker.EnvStickyCacheSize, "")
	old := debug.SetMemoryLimit(512 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	n, err := worker.StickyCacheSizeFromEnv(os.Getenv)
	require.NoError(t, err)
	require.Equal(t, 2048, n)
}
