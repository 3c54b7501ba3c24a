package proccpu

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOfUnknownProcess(t *testing.T) {
	_, err := Of(1 << 30)
	require.Error(t, err)
}

func TestFindThisProcess(t *testing.T) {
	me := os.Args[0]
	pids := Find(func(cmd string) bool { return strings.HasPrefix(cmd, me) })
	require.Contains(t, pids, os.Getpid())
}
