package main

import (
	"fmt"
	"os"
	"path/filepath"
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

// writeHeapProfile writes this process's heap profile (in use after the
// GC heapMiB ran) to dir/heap-<watching>.pb.gz; a no-op without dir.
// `go tool pprof -sample_index=inuse_space -base heap-10.pb.gz
// heap-2010.pb.gz` then shows what the extra verifications hold.
func writeHeapProfile(dir string, watching int) error {
	if dir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pb.gz", watching)))
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

// startIngestProfile starts a CPU profile of one ingest case (and its
// notices' drain) in dir/cpu-ingest-<case>.pb.gz and returns what stops
// it; a no-op without dir.
func startIngestProfile(dir string, ingestCase int) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-ingest-%d.pb.gz", ingestCase)))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile (not with %s): %w", EnvCPUProfile, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
