package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/stretchr/testify/require"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// commitlayerBinary builds this command once per test process.
func commitlayerBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs it in processes of its own")
	}
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "commitlayer-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "commitlayer")
		build := exec.Command("go", "build", "-o", binaryPath, ".")
		build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := build.CombinedOutput(); err != nil {
			binaryErr = &buildError{out: string(out), err: err}
		}
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// syncBuffer is a log sink shared by a process's stdout and stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProcess runs the binary with args in the stack's environment plus
// extra, until the test ends; its output is returned as it grows.
func startProcess(t *testing.T, bin string, extra map[string]string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ() // newStack's t.Setenv: same database, dev server and task queue
	for k, v := range extra {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s %v log:\n%s", filepath.Base(bin), args, logs.String())
		}
	})
	return cmd, logs
}

// benchmarkTaskNames are workflow and activity types only the benchmark
// runs: a product worker's log naming one has been handed a benchmark task.
var benchmarkTaskNames = []string{"Benchmark", "Scenario", "Replay", "Prepare", "RunPrior", "RunAgent", "Judge",
	"AfterSettlement", "Cleanup", "StartAgent", "ModelTurn", "AgentToolCall"}

// TestMixedFleetProductWorkerBesideBenchmark runs a product-only `commitlayer
// dev` (its own process, the product's task queue and deployment) beside a
// benchmark process on the same namespace, task queue name and database:
// the refund and payout families agree with the oracle on every row, and
// the product process is never handed a task it cannot run.
func TestMixedFleetProductWorkerBesideBenchmark(t *testing.T) {
	bin := commitlayerBinary(t)
	// The benchmark process: this test's Main, the benchmark's workers only.
	s := newStack(t, Roles{API: true, Benchmark: true, BenchmarkWorker: true})
	// The product process: `commitlayer dev`, nothing of the benchmark.
	dev, devLogs := startProcess(t, bin, map[string]string{"COMMITLAYER_LOG_LEVEL": "DEBUG"}, "dev")
	waitLog(t, devLogs, "api listening", time.Minute)

	var started struct {
		ID string `json:"id"`
	}
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"only": []string{"refund/", "payout/"}, "concurrency": 4}, 202, &started)
	run := waitRun(t, s, started.ID, 6*time.Minute)
	require.Equal(t, "done", run.Status, run.LogTail)
	require.GreaterOrEqual(t, len(run.Results), 30, "the refund and payout families")
	families := map[string]int{}
	for _, r := range run.Results {
		require.Empty(t, r.Error, r.ID)
		require.True(t, r.Agree.Both(), "%s: truth %s/%s, verdict %s/%s %+v", r.ID, r.Truth.Outcome, r.Truth.Policy,
			r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy, r.Verdict.Findings)
		families[strings.SplitN(r.ID, "/", 2)[0]]++
	}
	require.Positive(t, families["refund"])
	require.Positive(t, families["payout"])

	// The product process was up the whole time and saw none of it.
	require.Nil(t, dev.ProcessState, "the product process exited during the run")
	log := devLogs.String()
	require.Contains(t, log, "worker started")
	require.NotContains(t, log, "benchmark workers started")
	for _, bad := range []string{"unable to find", "Supported types", "not registered"} {
		require.NotContains(t, log, bad)
	}
	for _, name := range benchmarkTaskNames {
		require.NotContains(t, log, "WorkflowType="+name)
		require.NotContains(t, log, "ActivityType="+name)
	}
}

type runView struct {
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Results []matrix.Row `json:"results"`
	LogTail string       `json:"log_tail"`
}

// waitRun polls a benchmark run until it is no longer running.
func waitRun(t *testing.T, s *stack, id string, timeout time.Duration) runView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var run runView
		s.do(s.adminKey, "GET", "/v1/admin/benchmark/"+id, nil, 200, &run)
		if run.Status != "running" {
			return run
		}
		require.True(t, time.Now().Before(deadline), "benchmark still running: %s", run.LogTail)
		time.Sleep(500 * time.Millisecond)
	}
}

// waitLog waits for a line containing want in a process's output.
func waitLog(t *testing.T, logs *syncBuffer, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(logs.String(), want) {
		require.True(t, time.Now().Before(deadline), "no %q in the log within %s:\n%s", want, timeout, logs.String())
		time.Sleep(100 * time.Millisecond)
	}
}

// quietLogger is a logger for a second Main in a test.
func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// openMain opens another Main in this process on the stack's environment
// (same database, server, queue and deployment names), with cfg changed by
// edit; it is closed when the test ends.
func openMain(t *testing.T, roles Roles, edit func(*Config), more func(*Main)) *Main {
	t.Helper()
	cfg, err := configFromEnv(roles)
	require.NoError(t, err)
	if edit != nil {
		edit(&cfg)
	}
	m := &Main{Config: cfg, Logger: quietLogger()}
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, m.Build(ctx, roles), "build")
	if more != nil {
		more(m) // between Build and Start: register more on the workers
	}
	require.NoError(t, m.Start(ctx), "start")
	return m
}
