package loadtest

import (
	"bytes"
	"math"
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
	for f, ok := next(); ok; f, ok = next() {
		require.NoError(t, f.Validate())
		require.False(t, ids[f.ExternalID], "external ids are unique")
		ids[f.ExternalID] = true
		per[f.Subject]++
	}
	require.Equal(t, map[commitlayer.Subject]int{"account:acc_0": 4, "account:acc_1": 3, "account:acc_2": 3}, per)
}

func TestScaleConfigRefusesImpossibleSizes(t *testing.T) {
	ok := ScaleConfig{Facts: 1000, Subjects: 100, SmallFacts: 100, Watching: 20, SmallWatching: 2, Probes: 5,
		Batches: 2, Batch: 100, Burst: 5, InFlight: 1, Retention: time.Hour}
	require.NoError(t, ok.Check())
	for name, edit := range map[string]func(*ScaleConfig){
		"fewer facts than subjects":    func(c *ScaleConfig) { c.Facts, c.Subjects = 10, 20 },
		"small bigger than big":        func(c *ScaleConfig) { c.SmallFacts = 2000 },
		"no probes":                    func(c *ScaleConfig) { c.Probes = 0 },
		"more probes than subjects":    func(c *ScaleConfig) { c.Probes = 11 },
		"fewer watching than small":    func(c *ScaleConfig) { c.Watching, c.SmallWatching = 5, 10 },
		"a burst bigger than a batch":  func(c *ScaleConfig) { c.Burst = 2000 },
		"a negative retention":         func(c *ScaleConfig) { c.Retention = -time.Hour },
		"a profile that is not a dir.": func(c *ScaleConfig) { c.Profile = "/dev/null/x" },
	} {
		c := ok
		edit(&c)
		require.Error(t, c.Check(), name)
	}
}

func TestConfigCheck(t *testing.T) {
	ok := Config{Mode: "settle", Actions: 1, Concurrency: 1, Window: time.Second, Workers: 1}
	require.NoError(t, ok.Check())
	for _, c := range []Config{
		{Mode: "scale", Actions: 1, Concurrency: 1, Window: time.Second, Workers: 1},
		{Mode: "verify", Actions: 0, Concurrency: 1, Window: time.Second, Workers: 1},
		{Mode: "verify", Actions: 1, Concurrency: 1, Window: 0, Workers: 1},
		{Mode: "verify", Actions: 1, Concurrency: 1, Window: time.Second, Workers: 17},
	} {
		require.Error(t, c.Check(), "%+v", c)
	}
}

func TestCompactIDsKeepsTheIDs(t *testing.T) {
	ids := []string{"act_1", "", "act_22", "act_333"}
	require.Equal(t, ids, compactIDs(ids))
	require.Empty(t, compactIDs(nil))
}

func TestSampleLastTakesTheLastFirst(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	got := sampleLast(ids, 3)
	require.Equal(t, []string{"e", "b"}, got, "evenly spread, at most 3")
	require.Equal(t, []string{"e"}, sampleLast(ids, 1))
	require.Len(t, sampleLast(ids, 10), 5)
}

func TestPercentiles(t *testing.T) {
	ds := []time.Duration{5 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	require.Equal(t, 3*time.Millisecond, pct(ds, 50))
	require.Equal(t, 5*time.Millisecond, pct(ds, 99))
	require.Equal(t, time.Millisecond, pct(ds, 1))
	require.Zero(t, pct(nil, 50))
	require.Equal(t, "2.00", ratio(4*time.Millisecond, 2*time.Millisecond))
	require.Equal(t, "n/a", ratio(time.Millisecond, 0))
}

func TestOtherDatabasesBackend(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		other   bool
	}{
		{"postgres: 15/main: postgres commitlayer 127.0.0.1(38154) idle", false},
		{"postgres: 15/main: postgres commitlayer_h26a 127.0.0.1(41692) INSERT", true},
		{"postgres: 15/main: app other [local] idle in transaction", true},
		{"postgres: 15/main: checkpointer ", false},
		{"postgres: 15/main: walwriter", false},
		{"postgres: 15/main: autovacuum worker commitlayer_h26a", false},
		{"/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main", false},
	} {
		require.Equal(t, c.other, otherDatabasesBackend(c.cmdline, "commitlayer"), c.cmdline)
	}
	require.False(t, otherDatabasesBackend("postgres: 15/main: postgres x 127.0.0.1(1) idle", ""), "with no database known, every process counts")
}

func TestCPUSnapshotSinceCountsProcessByProcess(t *testing.T) {
	before := cpuSnapshot{"postgres": {1: 10, 2: 5}, "temporal": {7: 3}}
	after := cpuSnapshot{"postgres": {1: 12, 3: 0.5}, "temporal": {7: 3.25}}
	got := after.since(before)
	// pid 2 exited (its 5 s gone from the total), pid 3 started: 2 + 0.5.
	require.Equal(t, map[string]float64{"postgres": 2.5, "temporal": 0.25}, got)
	require.Equal(t, 2.75, cpuTotal(got))
}

func TestIngestBatchesBurstOnSubjects(t *testing.T) {
	c := ScaleConfig{Batches: 2, Batch: 10, Burst: 5, Watching: 3}
	bs := ingestBatches(c, ingestCase{prefix: "w", round: 1, changing: true})
	require.Len(t, bs, 2)
	seen := map[string]bool{}
	for _, b := range bs {
		require.Len(t, b, 10)
		for i, f := range b {
			require.NoError(t, f.Validate())
			require.False(t, seen[f.ExternalID])
			seen[f.ExternalID] = true
			require.Equal(t, i%5 == 0, f.Type == "payout_sent", "each burst's first fact changes the verdict")
		}
	}
	require.Equal(t, commitlayer.Subject("account:w_2"), bs[1][0].Subject, "subjects cycle through the watched ones")
}
