package testenv

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/proccpu"
)

func TestCPUOfThisProcess(t *testing.T) {
	// Burn a little CPU so there is something to count.
	x := 0
	for i := range 20_000_000 {
		x += i % 7
	}
	_ = x
	self, twice, ok := CPU([]int{os.Getpid(), os.Getpid()})
	require.True(t, ok)
	require.Positive(t, self)
	of, err := proccpu.Of(os.Getpid())
	require.NoError(t, err)
	// /proc counts in ticks of 10 ms; getrusage is finer.
	require.InDelta(t, self.Seconds(), of.Seconds(), 0.05)
	require.GreaterOrEqual(t, twice, of, "read twice, later than of")
	_, _, ok = CPU([]int{1 << 30})
	require.False(t, ok)
}
