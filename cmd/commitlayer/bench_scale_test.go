package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchScaleTiny runs `commitlayer bench scale` at a tiny size on the
// dev server, so it keeps working; it asserts the shape of the output,
// never a timing.
func TestBenchScaleTiny(t *testing.T) {
	setBenchEnv(t)
	// The watching verifications sleep outside the worker two seconds
	// after they start, not two minutes.
	t.Setenv("COMMITLAYER_DORMANT_MIN_AGE", "2s")
	prof := t.TempDir()
	code, stdout, stderr := runCLI(t, "bench", "scale", "-facts", "2000", "-subjects", "200", "-small-facts", "200",
		"-watching", "20", "-small-watching", "2", "-probes", "3", "-batches", "4", "-batch", "100", "-burst", "5",
		"-profile", prof)
	require.Zero(t, code, "stdout %s\nstderr %s", stdout, stderr)
	// -profile: a heap profile per watching case, a CPU profile per ingest.
	for _, name := range []string{"heap-2.pb.gz", "heap-22.pb.gz", "cpu-ingest-0.pb.gz", "cpu-ingest-1.pb.gz", "cpu-ingest-2.pb.gz"} {
		st, err := os.Stat(filepath.Join(prof, name))
		require.NoError(t, err, name)
		require.Positive(t, st.Size(), name)
	}
	require.Regexp(t, `every sampled wake ran|still not woken`, stdout, "the wakes are waited for")
	require.Regexp(t, `equal work: this process's heap [0-9.]+ MiB before any verification; then 20 verifications started in [^,]+, each awake 2s and finished`, stdout)
	require.Regexp(t, `asleep outside the worker [0-9]+s after, 0 of a sample of 2 still awake`, stdout)
	require.Regexp(t, `asleep outside the worker [0-9]+s after, 0 of a sample of 22 still awake`, stdout)
	for _, axis := range []string{"facts_per_tenant", "open_verifications", "open_verifications_heap", "ingest_while_watched", "ingest_while_watched_changing", "store_bytes_per_fact"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^ratio `+axis+` [0-9]+\.[0-9]{2}$`), stdout)
	}
	require.Contains(t, stdout, "retention 720h0m0s", "the purge is timed or said to be skipped")
	// Notes on the watched subjects change no verdict: their notice wakes
	// nobody. A burst of 5 facts that changes a verdict signals its
	// verification once, not once per fact. (Delivery is at least once: a
	// notice whose signals timed out part-way is sent again whole, so a
	// loaded machine can show a little more than 1.)
	m := regexp.MustCompile(`new-facts signals: ([0-9.]+) signals`).FindAllStringSubmatch(stdout, -1)
	require.Len(t, m, 2, stdout)
	notes, err := strconv.ParseFloat(m[0][1], 64)
	require.NoError(t, err)
	require.Zero(t, notes, "notes woke watching verifications")
	perBurst, err := strconv.ParseFloat(m[1][1], 64)
	require.NoError(t, err)
	require.Positive(t, perBurst, "verdict-changing bursts woke nobody")
	require.Less(t, perBurst, 5.0)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "ratio "), "the ratios come last")
}

// TestBenchFlagsRefused: the load test's flags are checked before
// anything starts (loadtest.Config.Check, ScaleConfig.Check).
func TestBenchFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "nope"},
		{"bench", "verify", "-bogus"},
	} {
		code, _, _ := runCLI(t, args...)
		require.Equal(t, 2, code, "%v", args)
	}
	t.Setenv("COMMITLAYER_POLL_INTERVAL", "fast")
	code, _, stderr := runCLI(t, "bench", "verify")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "COMMITLAYER_POLL_INTERVAL")
}
