// Package proccpu reads how much CPU processes on this Linux host have used,
// for the load test (sandbox/loadtest) and the Go benchmarks
// (internal/testenv.CPU), which report CPU per operation beside wall time
// (wall time moves with the neighbours on a shared machine; CPU time
// barely does).
package proccpu

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ticksPerSecond is USER_HZ, 100 on Linux.
const ticksPerSecond = 100

// Of returns the user plus system CPU time process pid has used, from
// /proc/<pid>/stat.
func Of(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name (which may hold spaces and
	// parentheses) start after the last ')': utime and stime are the 12th
	// and 13th of those.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / ticksPerSecond, nil
}

// Find returns the pids whose command line (arguments joined by spaces)
// match reports true for.
func Find(match func(cmdline string) bool) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		if match(strings.TrimSpace(string(bytes.ReplaceAll(raw, []byte{0}, []byte{' '})))) {
			out = append(out, pid)
		}
	}
	return out
}
