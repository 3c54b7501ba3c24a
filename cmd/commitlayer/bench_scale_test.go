package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

func TestPrintScaleEndsWithOneRatioPerAxis(t *testing.T) {
	var buf bytes.Buffer
	printScale(&buf, []scaleAxis{
		{name: "facts_per_tenant", unit: "ms", small: 4, big: 5, smallN: "10 facts", bigN: "100 facts"},
		{name: "open_verifications_heap", unit: "MiB", small: 20, big: 20},
		{name: "store_bytes_per_fact", unit: "B", small: 0, big: 300},
		{name: "broken", unit: "µs", small: 1, big: math.NaN()},
	})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Equal(t, []string{
		"ratio facts_per_tenant 1.25",
		"ratio open_verifications_heap 1.00",
		"ratio store_bytes_per_fact n/a",
		"ratio broken n/a",
	}, lines[len(lines)-4:])
	require.Contains(t, lines[1], "4.00 ms (10 facts)")
	require.Contains(t, lines[1], "5.00 ms (100 facts)")
}

func TestTenantFactsSpreadOverSubjects(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	next := tenantFacts("acc", 3, 10, at)
	per := map[commitlayer.Subject]int{}
	ids := map[string]bool{}
	for {
		f, ok, err := next()
		require.NoError(t, err)
		if !ok {
			break
		}
		require.NoError(t, f.Validate())
		require.False(t, ids[f.ExternalID], "external ids are unique")
		ids[f.ExternalID] = true
		per[f.Subject]++
	}
	require.Equal(t, map[commitlayer.Subject]int{"account:acc_0": 4, "account:acc_1": 3, "account:acc_2": 3}, per)
}

func TestParseScaleFlagsRefusesImpossibleSizes(t *testing.T) {
	for _, args := range [][]string{
		{"-facts", "10", "-subjects", "20"},
		{"-small-facts", "2000000"},
		{"-probes", "0"},
		{"-watching", "5", "-small-watching", "10"},
		{"-burst", "2000"},
		{"-retention", "-1h"},
	} {
		_, err := parseScaleFlags(args, io.Discard)
		require.Error(t, err, "%v", args)
	}
	f, err := parseScaleFlags(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1_000_000, f.facts)
}

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
		"-watching", "20", "-small-watching", "2", "-probes", "3", "-batches", "4", "-batch", "100", "-burst", "5", "-explain",
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
	require.Contains(t, stdout, "EXPLAIN FactsAbout at 2000 facts")
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

func TestCompactIDsKeepsTheIDs(t *testing.T) {
	ids := []string{"act_1", "", "act_22", "act_333"}
	got := compactIDs(ids)
	require.Equal(t, ids, got)
	require.Empty(t, compactIDs(nil))
}
