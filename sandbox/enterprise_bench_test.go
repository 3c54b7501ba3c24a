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
	dir := b.TempDir()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d := b.TempDir()
		_ = dir
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
