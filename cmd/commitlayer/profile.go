package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// EnvCPUProfile names a file to write this process's CPU profile to while a
// command runs (go tool pprof reads it): how docs/benchmarks.md finds where
// a verification's time goes.
const EnvCPUProfile = "COMMITLAYER_CPUPROFILE"

// startCPUProfile starts the profile COMMITLAYER_CPUPROFILE asks for and
// returns what stops it; a no-op without it.
func startCPUProfile() (stop func(), err error) {
	path := os.Getenv(EnvCPUProfile)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvCPUProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", EnvCPUProfile, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
