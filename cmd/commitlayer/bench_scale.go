package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/workflows"
)

// `commitlayer bench scale` measures how the cost of a verification grows
// with the work around it, each growth axis against its own small case on
// the same server, worker and database:
//
//   - facts_per_tenant: pass latency of a verification in a tenant holding
//     -facts facts over -subjects subjects ÷ in one holding -small-facts
//     (the same facts per subject);
//   - open_verifications: pass latency, and the heap of this process (API
//     and worker), with -watching verifications watching ÷ with
//     -small-watching;
//   - ingest_while_watched: POST /v1/facts wall time per fact (batches of
//     -batch, -in-flight at once) on subjects -watching verifications watch
//     ÷ on subjects nobody watches, with the signals each burst sent;
//   - store_bytes_per_fact: the facts table's bytes per row (heap and
//     indexes) at the big tenant's size ÷ at the small one's; and a
//     retention purge of the big tenant, timed.
//
// It prints a table of the absolute figures, then one line per axis:
// `ratio <axis> <big ÷ small>` (1.0: no growth).

type scaleFlags struct {
	facts, subjects, smallFacts     int
	watching, smallWatching, probes int
	batches, batch, burst, inFlight int
	retention                       time.Duration
	explain, keep, equalWork        bool
	profile                         string // directory for the heap and CPU profiles
}

func parseScaleFlags(args []string, stderr io.Writer) (scaleFlags, error) {
	var f scaleFlags
	fs := flag.NewFlagSet("commitlayer bench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.facts, "facts", 1_000_000, "facts in the big tenant (bulk-loaded with COPY)")
	fs.IntVar(&f.subjects, "subjects", 100_000, "subjects the big tenant's facts are spread over")
	fs.IntVar(&f.smallFacts, "small-facts", 10_000, "facts in the small tenant (same facts per subject)")
	fs.IntVar(&f.watching, "watching", 2_000, "verifications watching in the big case of open_verifications and ingest_while_watched")
	fs.IntVar(&f.smallWatching, "small-watching", 10, "verifications watching in the small case")
	fs.IntVar(&f.probes, "probes", 100, "verifications measured per case, one at a time")
	fs.IntVar(&f.batches, "batches", 40, "POST /v1/facts batches per ingest case")
	fs.IntVar(&f.batch, "batch", 1000, "facts per batch")
	fs.IntVar(&f.burst, "burst", 10, "facts per subject in a batch (a burst on one subject)")
	fs.IntVar(&f.inFlight, "in-flight", 4, "batches in flight")
	fs.DurationVar(&f.retention, "retention", 30*24*time.Hour, "retention of the purge run on the big tenant (its facts span 90 days)")
	fs.BoolVar(&f.explain, "explain", false, "print EXPLAIN (ANALYZE, BUFFERS) of the pass's queries in both tenants")
	fs.StringVar(&f.profile, "profile", "", "write heap profiles of each watching case (after a GC) and CPU profiles of each ingest case to this directory (go tool pprof)")
	fs.BoolVar(&f.keep, "keep", false, "keep the bench's tenants and facts (default: deleted at the end)")
	fs.BoolVar(&f.equalWork, "equal-work", true, "before the small watching case, start as many verifications as the big case has watching and let them finish, each awake as long as a watcher is before it sleeps: both heaps are then taken after the same work, and differ by what the watching verifications hold")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	switch {
	case f.subjects < 1 || f.facts < 2*f.subjects:
		return f, errors.New("-subjects must be at least 1 and -facts at least 2 per subject")
	case f.smallFacts < 2*f.facts/f.subjects || f.smallFacts > f.facts:
		return f, errors.New("-small-facts must hold at least one subject's facts and at most -facts")
	case f.probes < 1 || f.probes > f.smallFacts*f.subjects/f.facts:
		return f, errors.New("-probes must be at least 1 and at most the small tenant's subjects")
	case f.smallWatching < 1 || f.watching < f.smallWatching:
		return f, errors.New("-small-watching must be at least 1 and -watching at least -small-watching")
	case f.batches < 1 || f.batch < 1 || f.burst < 1 || f.burst > f.batch || f.inFlight < 1:
		return f, errors.New("-batches, -batch, -burst, -in-flight must be at least 1, -burst at most -batch")
	case f.retention <= 0:
		return f, errors.New("-retention must be positive")
	}
	if f.profile != "" {
		// Made now: a directory found missing at the first profile would
		// end a run minutes in.
		if err := os.MkdirAll(f.profile, 0o755); err != nil {
			return f, fmt.Errorf("-profile: %w", err)
		}
	}
	return f, nil
}

// scaleAxis is one growth axis: a cost measured in its small and big case.
type scaleAxis struct {
	name         string
	small, big   float64
	unit         string // how small and big print
	smallN, bigN string // the sizes of the two cases
}

// ratio is big ÷ small; ok is false when small is zero or either is not a
// number.
func (a scaleAxis) ratio() (float64, bool) {
	if a.small <= 0 || math.IsNaN(a.big) || math.IsNaN(a.small) || math.IsInf(a.big, 0) {
		return 0, false
	}
	return a.big / a.small, true
}

// printScale prints the table of absolute figures, then one ratio line
// per axis, last.
func printScale(w io.Writer, axes []scaleAxis) {
	fmt.Fprintf(w, "  %-26s %-28s %-28s\n", "axis", "small case", "big case")
	for _, a := range axes {
		fmt.Fprintf(w, "  %-26s %-28s %-28s\n", a.name,
			fmt.Sprintf("%s (%s)", fmtScale(a.small, a.unit), a.smallN), fmt.Sprintf("%s (%s)", fmtScale(a.big, a.unit), a.bigN))
	}
	for _, a := range axes {
		if r, ok := a.ratio(); ok {
			fmt.Fprintf(w, "ratio %s %.2f\n", a.name, r)
		} else {
			fmt.Fprintf(w, "ratio %s n/a\n", a.name)
		}
	}
}

func fmtScale(v float64, unit string) string {
	switch unit {
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	case "µs":
		return fmt.Sprintf("%.1f µs", v)
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
}

func (b *benchmarker) benchScale(ctx context.Context, w io.Writer, f scaleFlags) error {
	hc := client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	once := client.WithRetry(client.RetryPolicy{MaxAttempts: 1})
	admin, err := client.New(b.m.URL(), b.m.Config.AdminKey, hc, once)
	if err != nil {
		return err
	}
	newTenant := func(name string) (*benchmarker, error) {
		t, err := admin.CreateTenant(ctx, name)
		if err != nil {
			return nil, err
		}
		api, err := client.New(b.m.URL(), t.APIKey, hc, once)
		if err != nil {
			return nil, err
		}
		return &benchmarker{m: b.m, tenant: t.ID, api: api, workers: b.workers}, nil
	}
	tenants := []string{b.tenant}
	var watchers []string // action ids of the watching verifications
	defer func() {
		// Leave nothing sleeping on the server or filling the database.
		cctx := context.WithoutCancel(ctx)
		_ = closedLoopN(cctx, len(watchers), 16, func(ctx context.Context, i int) error {
			_ = b.m.Temporal.TerminateWorkflow(ctx, workflows.VerifyWorkflowID(b.tenant, watchers[i]), "", "bench scale done")
			if f.keep {
				_ = b.m.DB.EndWatch(ctx, b.tenant, watchers[i], time.Now())
			}
			return nil
		})
		if !f.keep {
			for _, t := range tenants {
				_ = b.m.DB.DeleteTenant(cctx, t)
			}
		}
	}()
	requestedAt := time.Now().UTC().Add(-11 * time.Minute) // settled: provisional and final at once
	perSubject := f.facts / f.subjects
	fmt.Fprintf(w, "bench scale: %s, %s; sticky cache %d, %s\n", b.workersDesc(), benchEnv(),
		b.m.Config.StickyCacheSize, dormancyDesc(b.m.Config.Dormancy))

	// Start from a vacuumed store: an earlier run's deleted tenants leave
	// their rows dead, and a server with autovacuum off (as on the
	// machine these figures come from) keeps them, and their pages,
	// for the next run to read past.
	start := time.Now()
	if _, err := b.m.DB.Pool().Exec(ctx, `VACUUM (ANALYZE) facts, actions, verdicts, fact_notifications`); err != nil {
		return err
	}
	fmt.Fprintf(w, "  VACUUM (ANALYZE) of the store before the run: %s\n", time.Since(start).Round(time.Millisecond))
	// The store's figures are the facts table's sizes: what earlier runs
	// or other tenants left in it (VACUUM does not shrink an index) is
	// counted too, so say how much that is.
	if before, err := b.m.DB.FactStoreSize(ctx, ""); err == nil && before.TableBytes+before.IndexBytes > 64<<20 {
		fmt.Fprintf(w, "  note: the facts table already holds %d rows in %.1f MiB of heap and %.1f MiB of indexes; the store's figures below count them (on a database of its own, VACUUM FULL facts first)\n",
			before.Facts, mib(before.TableBytes), mib(before.IndexBytes))
	}

	// facts_per_tenant, and the store's size at each tenant's size.
	small, err := newTenant("bench-scale-small")
	if err != nil {
		return err
	}
	tenants = append(tenants, small.tenant)
	big, err := newTenant("bench-scale-big")
	if err != nil {
		return err
	}
	tenants = append(tenants, big.tenant)
	var sizes [2]postgres.StoreSize
	var passSmall, passBig []time.Duration
	for i, t := range []*benchmarker{small, big} {
		n := []int{f.smallFacts, f.facts}[i]
		if _, _, err := t.api.PutContract(ctx, payoutBenchContract("bench_payout", "10m", "0s")); err != nil {
			return err
		}
		start := time.Now()
		loaded, err := b.m.DB.BulkLoadFacts(ctx, t.tenant, tenantFacts("acc", n/perSubject, n, requestedAt))
		if err != nil {
			return err
		}
		load := time.Since(start)
		if _, err := b.m.DB.Pool().Exec(ctx, `ANALYZE facts`); err != nil {
			return err
		}
		if sizes[i], err = b.m.DB.FactStoreSize(ctx, ""); err != nil {
			return err
		}
		fmt.Fprintf(w, "  tenant of %d facts over %d subjects: COPY %s (%.0f facts/s)\n", loaded, n/perSubject, load.Round(time.Millisecond), float64(loaded)/load.Seconds())
		if f.explain {
			plans, err := b.m.DB.ExplainPassQueries(ctx, t.tenant, "account:acc_0", "bench_payout", time.Now())
			if err != nil {
				return err
			}
			for _, p := range plans {
				fmt.Fprintf(w, "    EXPLAIN %s at %d facts:\n      %s\n", p.Name, loaded, strings.ReplaceAll(p.Plan, "\n", "\n      "))
			}
		}
	}
	// The two tenants' probes interleave, five rounds each, so that the
	// neighbours' load falls on both alike.
	var e2eSmall, e2eBig []time.Duration
	rounds := min(5, f.probes)
	for r := range rounds {
		n := f.probes / rounds
		if r == 0 {
			n += f.probes % rounds
		}
		for i, t := range []*benchmarker{small, big} {
			pass, e2e, err := t.probe(ctx, n, requestedAt)
			if err != nil {
				return err
			}
			if i == 0 {
				passSmall, e2eSmall = append(passSmall, pass...), append(e2eSmall, e2e...)
			} else {
				passBig, e2eBig = append(passBig, pass...), append(e2eBig, e2e...)
			}
		}
	}
	for i, pass := range [][]time.Duration{passSmall, passBig} {
		e2e := [][]time.Duration{e2eSmall, e2eBig}[i]
		fmt.Fprintf(w, "  %d facts: pass latency p50 %s p99 %s; POST → final verdict p50 %s p99 %s (%d verifications, one at a time, %d rounds interleaved)\n",
			[]int{f.smallFacts, f.facts}[i], pct(pass, 50), pct(pass, 99), pct(e2e, 50), pct(e2e, 99), len(pass), rounds)
	}
	for _, s := range sizes {
		fmt.Fprintf(w, "  facts table at %d rows: heap %.1f MiB, indexes %.1f MiB (%s), %.0f bytes per fact\n",
			s.Facts, mib(s.TableBytes), mib(s.IndexBytes), indexSizes(s.Indexes), bytesPerFact(s))
	}
	start = time.Now()
	purged, err := b.m.DB.PurgeTenantFacts(ctx, big.tenant, f.retention, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  retention %s on the big tenant: %d facts dropped in %s (%.0f facts/s; the state facts of any open verification kept)\n",
		f.retention, purged, time.Since(start).Round(time.Millisecond), float64(purged)/time.Since(start).Seconds())
	// The purge leaves its rows dead: autovacuum (where it is on) would
	// reclaim them later, under whichever measurement runs then, and with
	// it off they stay for every later case to read past. Vacuum now,
	// timed: it is part of what retention costs.
	start = time.Now()
	if _, err := b.m.DB.Pool().Exec(ctx, `VACUUM (ANALYZE) facts`); err != nil {
		return err
	}
	fmt.Fprintf(w, "  VACUUM (ANALYZE) facts after the purge: %s\n", time.Since(start).Round(time.Millisecond))

	// open_verifications and ingest_while_watched, in the bench's tenant.
	if _, _, err := b.api.PutContract(ctx, payoutBenchContract("bench_payout", "10m", "0s")); err != nil {
		return err
	}
	if _, _, err := b.api.PutContract(ctx, payoutBenchContract("bench_watch", "10m", "2h")); err != nil {
		return err
	}
	// What a watching verification spends awake before it sleeps
	// (workflows/dormant.go); the -equal-work verifications are awake as
	// long, then finish.
	awake := 2 * time.Minute
	if b.m.Config.Dormancy.Enabled() {
		awake = b.m.Config.Dormancy.MinAge
	}
	if _, _, err := b.api.PutContract(ctx, payoutBenchContract("bench_brief", "10m", (awake+time.Minute).String())); err != nil {
		return err
	}
	if _, err := b.m.DB.BulkLoadFacts(ctx, b.tenant, tenantFacts("acc", 2*f.probes, 4*f.probes, requestedAt)); err != nil {
		return err
	}
	if _, err := b.m.DB.BulkLoadFacts(ctx, b.tenant, tenantFacts("w", f.watching, 2*f.watching, requestedAt)); err != nil {
		return err
	}
	type watchCase struct {
		pass    []time.Duration
		heap    float64 // MiB in use after a GC
		rss     float64
		perFact float64 // ingest wall µs per fact
		cpuFact float64 // ingest CPU µs per fact, every process
	}
	var cases [2]watchCase
	for i, n := range []int{f.smallWatching, f.watching} {
		if i == 0 && f.equalWork {
			fresh, _, _ := heapMiB()
			start := time.Now()
			ids, err := b.startBrief(ctx, f.watching, awake)
			if err != nil {
				// The ones started are ended by the cleanup, as watchers
				// are: their tenant is deleted under them.
				watchers = append(watchers, ids...)
				return err
			}
			fmt.Fprintf(w, "  equal work: this process's heap %.1f MiB before any verification; then %d verifications started in %s, each awake %s and finished (closed %s after the last start)\n",
				fresh, len(ids), time.Since(start).Round(time.Millisecond), awake, b.waitClosed(ctx, ids, awake+5*time.Minute).Round(time.Second))
		}
		start := time.Now()
		ids, err := b.startWatchers(ctx, len(watchers), n, requestedAt)
		if err != nil {
			watchers = append(watchers, ids...)
			return err
		}
		watchers = compactIDs(append(watchers, ids...))
		// Their verdicts are stored, but their workflows still have steps
		// to take (search attributes, the watch's timer): measure once the
		// worker is idle again, not behind that queue.
		started := time.Since(start)
		// Watching verifications sleep outside the worker once old enough
		// (workflows/dormant.go): measure them asleep, as they spend
		// nearly all of a watch.
		asleep := "dormancy off: awake"
		if b.m.Config.Dormancy.Enabled() {
			took, awake, err := b.waitAsleep(ctx, watchers, b.m.Config.Dormancy.MinAge+5*time.Minute)
			if err != nil {
				return err
			}
			asleep = fmt.Sprintf("asleep outside the worker %s after, %d of a sample of %d still awake", took.Round(time.Second), awake, min(100, len(watchers)))
		}
		quiet := b.waitQuiet(ctx, 3*time.Minute)
		fmt.Fprintf(w, "  %d verifications watching (%d started in %s; %s; the worker and Temporal idle %s after)\n", len(watchers), len(ids),
			started.Round(time.Millisecond), asleep, quiet.Round(time.Second))
		c := &cases[i]
		// Fresh statistics first: this tenant grew after the last ANALYZE,
		// and with stale ones the planner takes it for a tenant of one row
		// and scans all its facts (docs/benchmarks.md): that is the cost of
		// stale statistics, not of open verifications. And the tables the
		// starts wrote to vacuumed now, not by an autovacuum worker in the
		// middle of the probes.
		if _, err := b.m.DB.Pool().Exec(ctx, `VACUUM (ANALYZE) facts, actions, verdicts, fact_notifications`); err != nil {
			return err
		}
		// The starts left garbage behind: collect it now, so that the
		// collection it would trigger (a mark of the whole heap, 360 MiB
		// and 10⁴ stacks at 10⁴ watching, over the second or so the probes
		// take) does not land on them by chance. A collection's cost per
		// pass is its mark ÷ the passes that allocate a heap's worth;
		// the cycles that run during the probes anyway are counted.
		runtime.GC()
		var gc0, gc1 runtime.MemStats
		runtime.ReadMemStats(&gc0)
		if c.pass, _, err = b.probe(ctx, f.probes, requestedAt); err != nil {
			return err
		}
		runtime.ReadMemStats(&gc1)
		fmt.Fprintf(w, "    during the probes: %d garbage collections (%.1f ms of stop-the-world pauses), %.1f MiB allocated\n",
			gc1.NumGC-gc0.NumGC, float64(gc1.PauseTotalNs-gc0.PauseTotalNs)/1e6, mib(int64(gc1.TotalAlloc-gc0.TotalAlloc)))
		var stacks float64
		c.heap, stacks, c.rss = heapMiB()
		if err := writeHeapProfile(f.profile, len(watchers)); err != nil {
			return err
		}
		fmt.Fprintf(w, "    pass latency p50 %s p99 %s; this process (API and worker): heap %.1f MiB, stacks %.1f MiB, RSS %.1f MiB, %d goroutines\n",
			pct(c.pass, 50), pct(c.pass, 99), c.heap, stacks, c.rss, runtime.NumGoroutine())
		// Ingest: on nobody's subjects in the small case, on the watched
		// subjects in the big one (notes: facts that change no verdict).
		prefix, pool := "u", f.watching
		if i == 1 {
			prefix = "w"
		}
		label := map[int]string{0: "unwatched", 1: "watched"}[i]
		if c.perFact, c.cpuFact, err = b.measureIngest(ctx, w, f, label, prefix, pool, i, false, watchers); err != nil {
			return err
		}
	}
	// The same bursts on the same watched subjects once more, each one a
	// fact that changes its verification's verdict (a second payout): no
	// screen can spare these wakes, so this is the wake path's own cost.
	var changing watchCase
	changing.perFact, changing.cpuFact, err = b.measureIngest(ctx, w, f, "watched, every burst changing its verdict", "w", f.watching, 2, true, watchers)
	if err != nil {
		return err
	}
	axes := []scaleAxis{
		{name: "facts_per_tenant", unit: "ms", small: ms(pct(passSmall, 50)), big: ms(pct(passBig, 50)),
			smallN: fmt.Sprintf("pass p50, %d facts", f.smallFacts), bigN: fmt.Sprintf("%d facts", f.facts)},
		{name: "facts_per_tenant_p99", unit: "ms", small: ms(pct(passSmall, 99)), big: ms(pct(passBig, 99)),
			smallN: "pass p99", bigN: "pass p99"},
		{name: "open_verifications", unit: "ms", small: ms(pct(cases[0].pass, 50)), big: ms(pct(cases[1].pass, 50)),
			smallN: fmt.Sprintf("pass p50, %d watching", f.smallWatching), bigN: fmt.Sprintf("%d watching", f.watching)},
		{name: "open_verifications_p99", unit: "ms", small: ms(pct(cases[0].pass, 99)), big: ms(pct(cases[1].pass, 99)),
			smallN: "pass p99", bigN: "pass p99"},
		{name: "open_verifications_heap", unit: "MiB", small: cases[0].heap, big: cases[1].heap,
			smallN: "heap in use", bigN: "heap in use"},
		{name: "ingest_while_watched", unit: "µs", small: cases[0].perFact, big: cases[1].perFact,
			smallN: "wall per fact, none watch", bigN: fmt.Sprintf("%d watch", f.watching)},
		{name: "ingest_while_watched_cpu", unit: "µs", small: cases[0].cpuFact, big: cases[1].cpuFact,
			smallN: "CPU per fact", bigN: "CPU per fact"},
		{name: "ingest_while_watched_changing", unit: "µs", small: cases[0].perFact, big: changing.perFact,
			smallN: "wall per fact, none watch", bigN: "every burst a verdict change"},
		{name: "store_bytes_per_fact", unit: "B", small: bytesPerFact(sizes[0]), big: bytesPerFact(sizes[1]),
			smallN: fmt.Sprintf("%d rows", sizes[0].Facts), bigN: fmt.Sprintf("%d rows", sizes[1].Facts)},
	}
	printScale(w, axes)
	return nil
}

// benchScaleCmd is `commitlayer bench scale [flags]`.
func benchScaleCmd(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	f, err := parseScaleFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "commitlayer bench scale:", err)
		}
		return 2
	}
	if f.profile != "" {
		// Finer heap samples than the default one per 512 KiB: a watching
		// verification's objects are small.
		runtime.MemProfileRate = 4096
	}
	b, err := newBench(ctx, logger)
	if err != nil {
		logger.Error("bench", "error", err)
		return 1
	}
	defer b.m.Close()
	defer b.stopWorkers()
	if err := b.startWorkers(ctx, 1); err != nil {
		logger.Error("bench", "error", err)
		return 1
	}
	if err := b.benchScale(ctx, stdout, f); err != nil {
		logger.Error("bench scale", "error", err)
		return 1
	}
	return 0
}

// measureIngest posts the ingest case's batches (changing: each burst a
// second payout, which changes its verification's verdict; else notes),
// prints its figures, waits for every notice to be delivered and, on the
// watched subjects, for the wakes, and returns the wall and CPU time per
// fact.
func (b *benchmarker) measureIngest(ctx context.Context, w io.Writer, f scaleFlags, label, prefix string, pool, round int, changing bool, watchers []string) (perFact, cpuFact float64, err error) {
	batches := ingestBatches(f, prefix, pool, round, changing)
	// Each case starts just after a checkpoint: the first write to a page
	// after one puts the whole page in the WAL, and a checkpoint that
	// happened to start during one case and not the other (the COPY and
	// the purge before write ~1 GB of WAL, which requests them) would be
	// the difference between the cases. Only a superuser (or
	// pg_checkpoint) may; without it the case runs as it finds the server.
	start := time.Now()
	if _, err := b.m.DB.Pool().Exec(ctx, `CHECKPOINT`); err != nil {
		fmt.Fprintf(w, "    CHECKPOINT before the POSTs refused (%v): the WAL's state is as found\n", err)
	} else {
		fmt.Fprintf(w, "    CHECKPOINT before the POSTs: %s\n", time.Since(start).Round(time.Millisecond))
	}
	stopProfile, err := startIngestProfile(f.profile, round)
	if err != nil {
		return 0, 0, err
	}
	// As before the probes: the garbage of what ran before (and of the
	// batches just made) collected now, so that a collection it would
	// trigger — a mark of every cached verification's heap in this
	// process, which serves the API and the worker both — does not land on
	// the POSTs by chance; those that run during them are counted.
	runtime.GC()
	var gc0, gc1 runtime.MemStats
	runtime.ReadMemStats(&gc0)
	cpu0 := cpuByRole()
	ingestCPU := startCPU()
	new0, conflict0, retried0 := b.m.DB.InsertStats()
	ingestStart := time.Now()
	lat, err := b.ingest(ctx, f, batches)
	if err != nil {
		return 0, 0, err
	}
	wall := time.Since(ingestStart)
	cpu := cpuTotal(cpuByRole().since(cpu0))
	runtime.ReadMemStats(&gc1)
	facts := float64(f.batches * f.batch)
	perFact, cpuFact = 1e6*wall.Seconds()/facts, 1e6*cpu/facts
	fmt.Fprintf(w, "    POST /v1/facts on %s subjects: %d batches of %d (%d facts per subject), %d in flight: %.0f facts/s, batch p50 %s p99 %s; CPU %.1f µs per fact (API, worker, Temporal, Postgres)\n",
		label, f.batches, f.batch, f.burst, f.inFlight, facts/wall.Seconds(), pct(lat, 50), pct(lat, 99), cpuFact)
	fmt.Fprintf(w, "    while posting:%s", strings.TrimPrefix(ingestCPU.capture(wall), " "))
	fmt.Fprintf(w, "    while posting: %d garbage collections in this process (%.1f ms of stop-the-world pauses), %.1f MiB allocated\n",
		gc1.NumGC-gc0.NumGC, float64(gc1.PauseTotalNs-gc0.PauseTotalNs)/1e6, mib(int64(gc1.TotalAlloc-gc0.TotalAlloc)))
	new1, conflict1, retried1 := b.m.DB.InsertStats()
	fmt.Fprintf(w, "    while posting: %d batches inserted without ON CONFLICT, %d with it (%d of them after meeting a stored fact)\n",
		new1-new0, conflict1-conflict0, retried1-retried0)
	postCPU := startCPU()
	drained, err := b.noticesDrained(ctx)
	if err != nil {
		return 0, 0, err
	}
	stopProfile()
	drainCPU := "" // over less than a second the shares say nothing
	if drained >= time.Second {
		drainCPU = "; " + strings.TrimSpace(postCPU.capture(drained))
	}
	fmt.Fprintf(w, "    last POST → every notice of new facts delivered: %s%s; first POST → every notice delivered: %.0f facts/s\n",
		drained.Round(time.Millisecond), drainCPU, facts/(wall+drained).Seconds())
	if prefix == "w" {
		sig, err := b.signalsPerBurst(ctx, f, watchers, ingestStart)
		if err != nil {
			return 0, 0, err
		}
		fmt.Fprintf(w, "    new-facts signals: %s\n", sig)
	}
	return perFact, cpuFact, nil
}

// dormancyDesc says what watching verifications sleep through outside the
// worker.
func dormancyDesc(d workflows.Dormancy) string {
	if !d.Enabled() {
		return "no dormancy"
	}
	return fmt.Sprintf("dormant through waits of %s or more from %s old", d.MinWait, d.MinAge)
}
