package sandbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox"
)

// BenchmarkNew measures creating, seeding and serving an enterprise, then
// closing it: the cost the failure matrix pays per scenario.
func BenchmarkNew(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d := b.TempDir()
		e, err := sandbox.New(ctx, d, sandbox.Options{})
		require.NoError(b, err)
		require.NoError(b, e.Close())
	}
}

// BenchmarkNewOnly measures New alone (Close is outside the timer).
func BenchmarkNewOnly(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d := b.TempDir()
		e, err := sandbox.New(ctx, d, sandbox.Options{})
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, e.Close())
		b.StartTimer()
	}
}

// BenchmarkNewParallel builds enterprises several at once, as the failure
// matrix does on a 2-core machine (ns/op is wall time per enterprise).
func BenchmarkNewParallel(b *testing.B) {
	ctx := context.Background()
	b.SetParallelism(2) // 2 × GOMAXPROCS goroutines
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e, err := sandbox.New(ctx, b.TempDir(), sandbox.Options{})
			if err != nil {
				b.Error(err)
				return
			}
			if err := e.Close(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
