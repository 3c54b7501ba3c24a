package testenv

import (
	"syscall"
	"time"

	"github.com/commitlayer/commitlayer/internal/proccpu"
)

// CPU is what Go benchmarks report beside wall time: the CPU time this
// process has used (all threads, getrusage) and that of the processes
// pids (the database backends serving it, from /proc); ok is false when
// one of those could not be read.
func CPU(pids []int) (self, others time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, pid := range pids {
		d, err := proccpu.Of(pid)
		if err != nil {
			return self, 0, false
		}
		others += d
	}
	return self, others, true
}
