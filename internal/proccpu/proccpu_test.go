package proccpu

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSelfAndOfAgree(t *testing.T) {
	// Burn a little CPU so there is something to count.
	x := 0
	for i := range 20_000_000 {
		x += i % 7
	}
	_ = x
	self := Self()
	require.Positive(t, self)
	of, err := Of(os.Getpid())
	require.NoError(t, err)
	// /proc counts in ticks of 10 ms; getrusage is finer.
	require.InDelta(t, self.Seconds(), of.Seconds(), 0.05)
	total, ok := Sum([]int{os.Getpid(), os.Getpid()})
	require.True(t, ok)
	require.GreaterOrEqual(t, total, 2*of, "read twice, later than of")
}

func TestOfUnknownProcess(t *testing.T) {
	_, err := Of(1 << 30)
	require.Error(t, err)
	_, ok := Sum([]int{1 << 30})
	require.False(t, ok)
}

func TestFindThisProcess(t *testing.T) {
	me := os.Args[0]
	pids := Find(func(cmd string) bool { return strings.HasPrefix(cmd, me) })
	require.Contains(t, pids, os.Getpid())
}
