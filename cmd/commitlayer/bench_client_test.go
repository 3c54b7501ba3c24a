package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/testenv"
)

// TestBenchRunsThroughTheClient runs a small `commitlayer bench verify`
// and `settle` on the dev server: their calls go through the client
// package (tenant, contract, facts, actions).
func TestBenchRunsThroughTheClient(t *testing.T) {
	setBenchEnv(t)
	code, stdout, stderr := runCLI(t, "bench", "verify", "-actions", "3")
	require.Zero(t, code, "stdout %s\nstderr %s", stdout, stderr)
	require.Contains(t, stdout, "3")
	code, stdout, stderr = runCLI(t, "bench", "settle", "-actions", "4", "-concurrency", "2", "-window", "2s")
	require.Zero(t, code, "stdout %s\nstderr %s", stdout, stderr)
}

// setBenchEnv points a `commitlayer bench` run in this test at the test
// database and the dev server, on its own listener, task queue and admin key.
func setBenchEnv(t *testing.T) {
	t.Helper()
	for k, v := range map[string]string{
		"DATABASE_URL":           testenv.Postgres(t),
		"TEMPORAL_ADDRESS":       testenv.TemporalAddress(t),
		"TEMPORAL_NAMESPACE":     testenv.Namespace(),
		"COMMITLAYER_ADDR":       "",
		"COMMITLAYER_TASK_QUEUE": "",
		"COMMITLAYER_ADMIN_KEY":  "bench-admin-" + randHex(12),
	} {
		t.Setenv(k, v)
	}
}
