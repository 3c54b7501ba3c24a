package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/commitlayer/commitlayer/workflows"
)

// `commitlayer bench scale` measures how the cost of a verification grows
// with the work around it, each growth axis against its own small case on
// the same server, worker and database:
//
//   - facts_per_tenant: pass latency of a verification in a tenant holding
//     Facts facts over Subjects subjects ÷ in one holding SmallFacts (the
//     same facts per subject);
//   - open_verifications: pass latency, and the heap of this process (API
//     and worker), with Watching verifications watching ÷ with
//     SmallWatching;
//   - ingest_while_watched: POST /v1/facts wall time per fact (batches of
//     Batch, InFlight at once) on subjects Watching verifications watch ÷
//     on subjects nobody watches, with the signals each burst sent;
//   - store_bytes_per_fact: the facts table's bytes per row (heap and
//     indexes) at the big tenant's size ÷ at the small one's; and a
//     retention purge, timed.
//
// It prints a table of the absolute figures, then one line per axis:
// `ratio <axis> <big ÷ small>` (1.0: no growth).

// ScaleConfig is a scale run (the flags of `commitlayer bench scale`).
type ScaleConfig struct {
	Facts, Subjects, SmallFacts     int
	Watching, SmallWatching, Probes int
	Batches, Batch, Burst, InFlight int
	Retention                       time.Duration
	// Profile is a directory for the heap and CPU profiles ("": none).
	Profile string
	// Keep leaves the tenants and facts in place; EqualWork runs as many
	// verifications as the big watching case before the small one (the
	// heaps are then taken after the same work).
	Keep, EqualWork bool
}

// Check refuses sizes that cannot be measured, naming the flags, and makes
// the profile directory (a directory found missing at the first profile
// would end a run minutes in).
func (c ScaleConfig) Check() error {
	switch {
	case c.Subjects < 1 || c.Facts < 2*c.Subjects:
		return errors.New("-subjects must be at least 1 and -facts at least 2 per subject")
	case c.SmallFacts < 2*c.Facts/c.Subjects || c.SmallFacts > c.Facts:
		return errors.New("-small-facts must hold at least one subject's facts and at most -facts")
	case c.Probes < 1 || c.Probes > c.SmallFacts*c.Subjects/c.Facts:
		return errors.New("-probes must be at least 1 and at most the small tenant's subjects")
	case c.SmallWatching < 1 || c.Watching < c.SmallWatching:
		return errors.New("-small-watching must be at least 1 and -watching at least -small-watching")
	case c.Batches < 1 || c.Batch < 1 || c.Burst < 1 || c.Burst > c.Batch || c.InFlight < 1:
		return errors.New("-batches, -batch, -burst, -in-flight must be at least 1, -burst at most -batch")
	case c.Retention <= 0:
		return errors.New("-retention must be positive")
	}
	if c.Profile != "" {
		if err := os.MkdirAll(c.Profile, 0o755); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
	}
	return nil
}

// scale is one scale run.
type scale struct {
	s           *Stack
	c           ScaleConfig
	w           io.Writer
	ws          *workers
	bench       *tenant  // the open_verifications and ingest cases' tenant
	tenants     []string // every tenant the run made, deleted at the end
	watchers    []string // action ids of the watching verifications
	requestedAt time.Time
}

// RunScale runs the scale measurement and prints it to w, the ratios last.
func RunScale(ctx context.Context, s *Stack, c ScaleConfig, w io.Writer) error {
	if err := c.Check(); err != nil {
		return err
	}
	if c.Profile != "" {
		// Finer heap samples than the default one per 512 KiB: a watching
		// verification's objects are small.
		runtime.MemProfileRate = 4096
	}
	ws, err := startWorkers(ctx, s, 1)
	defer ws.stop()
	if err != nil {
		return err
	}
	// Settled: provisional and final at once.
	sc := &scale{s: s, c: c, w: w, ws: ws, requestedAt: time.Now().UTC().Add(-11 * time.Minute)}
	defer sc.cleanup(ctx)
	if sc.bench, err = sc.newTenant(ctx, "bench"); err != nil {
		return err
	}
	fmt.Fprintf(w, "bench scale: %s, %s; sticky cache %d, %s\n", ws, loadAverage(),
		s.StickyCacheSize, dormancyDesc(s.Dormancy))
	if err := sc.startClean(ctx); err != nil {
		return err
	}
	facts, err := sc.factsPerTenant(ctx)
	if err != nil {
		return err
	}
	if err := sc.retention(ctx); err != nil {
		return err
	}
	watch, err := sc.openVerifications(ctx)
	if err != nil {
		return err
	}
	printScale(w, axes(c, facts, watch))
	return nil
}

func (sc *scale) newTenant(ctx context.Context, name string) (*tenant, error) {
	t, err := newTenant(ctx, sc.s, name)
	if err != nil {
		return nil, err
	}
	sc.tenants = append(sc.tenants, t.id)
	return t, nil
}

// cleanup leaves nothing sleeping on the server or filling the database
// (with Keep, the tenants and facts stay, their watches ended).
func (sc *scale) cleanup(ctx context.Context) {
	cctx := context.WithoutCancel(ctx)
	_ = closedLoopN(cctx, len(sc.watchers), 16, func(ctx context.Context, i int) error {
		_ = sc.s.Temporal.TerminateWorkflow(ctx, workflows.VerifyWorkflowID(sc.bench.id, sc.watchers[i]), "", "bench scale done")
		if sc.c.Keep {
			_ = sc.s.DB.EndWatch(ctx, sc.bench.id, sc.watchers[i], time.Now())
		}
		return nil
	})
	if !sc.c.Keep {
		for _, t := range sc.tenants {
			_ = sc.s.DB.DeleteTenant(cctx, t)
		}
	}
}

// startClean starts from a vacuumed store: an earlier run's deleted
// tenants leave their rows dead, and a server with autovacuum off keeps
// them, and their pages, for the next run to read past. The store's
// figures are the facts table's sizes: what earlier runs or other tenants
// left in it (VACUUM does not shrink an index) is counted too, so it says
// how much that is.
func (sc *scale) startClean(ctx context.Context) error {
	took, err := vacuum(ctx, sc.s.DB, "facts, actions, verdicts, fact_notifications")
	if err != nil {
		return err
	}
	fmt.Fprintf(sc.w, "  VACUUM (ANALYZE) of the store before the run: %s\n", took.Round(time.Millisecond))
	if before, err := factStoreSize(ctx, sc.s.DB); err == nil && before.TableBytes+before.IndexBytes > 64<<20 {
		fmt.Fprintf(sc.w, "  note: the facts table already holds %d rows in %.1f MiB of heap and %.1f MiB of indexes; the store's figures below count them (on a database of its own, VACUUM FULL facts first)\n",
			before.Facts, mib(before.TableBytes), mib(before.IndexBytes))
	}
	return nil
}

// retention times the product's retention purge (postgres.DB.PurgeFacts)
// at the big tenant's size, and the VACUUM of the rows it leaves dead. It
// runs on every tenant of the database, so it is skipped (and said so)
// when tenants other than the run's hold facts it would drop.
func (sc *scale) retention(ctx context.Context) error {
	others, err := othersPastRetention(ctx, sc.s.DB, sc.tenants, sc.c.Retention)
	if err != nil {
		return err
	}
	if others > 0 {
		fmt.Fprintf(sc.w, "  retention %s: not timed, %d facts of other tenants of this database are older (run on a database of its own)\n", sc.c.Retention, others)
		return nil
	}
	start := time.Now()
	res, err := sc.s.DB.PurgeFacts(ctx, sc.c.Retention, time.Now())
	if err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Fprintf(sc.w, "  retention %s on the run's tenants: %d facts dropped in %s (%.0f facts/s; the state facts of any open verification kept)\n",
		sc.c.Retention, res.Deleted, took.Round(time.Millisecond), float64(res.Deleted)/took.Seconds())
	// The purge leaves its rows dead: autovacuum (where it is on) would
	// reclaim them later, under whichever measurement runs then, and with
	// it off they stay for every later case to read past. Vacuum now,
	// timed: it is part of what retention costs.
	if took, err = vacuum(ctx, sc.s.DB, "facts"); err != nil {
		return err
	}
	fmt.Fprintf(sc.w, "  VACUUM (ANALYZE) facts after the purge: %s\n", took.Round(time.Millisecond))
	return nil
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

// axes are the run's figures, small case and big case of each axis.
func axes(c ScaleConfig, f factsCase, wc watchCases) []scaleAxis {
	small, big, changing := wc.cases[0], wc.cases[1], wc.changing
	return []scaleAxis{
		{name: "facts_per_tenant", unit: "ms", small: ms(pct(f.pass[0], 50)), big: ms(pct(f.pass[1], 50)),
			smallN: fmt.Sprintf("pass p50, %d facts", c.SmallFacts), bigN: fmt.Sprintf("%d facts", c.Facts)},
		{name: "facts_per_tenant_p99", unit: "ms", small: ms(pct(f.pass[0], 99)), big: ms(pct(f.pass[1], 99)),
			smallN: "pass p99", bigN: "pass p99"},
		{name: "open_verifications", unit: "ms", small: ms(pct(small.pass, 50)), big: ms(pct(big.pass, 50)),
			smallN: fmt.Sprintf("pass p50, %d watching", c.SmallWatching), bigN: fmt.Sprintf("%d watching", c.Watching)},
		{name: "open_verifications_p99", unit: "ms", small: ms(pct(small.pass, 99)), big: ms(pct(big.pass, 99)),
			smallN: "pass p99", bigN: "pass p99"},
		{name: "open_verifications_heap", unit: "MiB", small: small.heap, big: big.heap,
			smallN: "heap in use", bigN: "heap in use"},
		{name: "ingest_while_watched", unit: "µs", small: small.perFact, big: big.perFact,
			smallN: "wall per fact, none watch", bigN: fmt.Sprintf("%d watch", c.Watching)},
		{name: "ingest_while_watched_cpu", unit: "µs", small: small.cpuFact, big: big.cpuFact,
			smallN: "CPU per fact", bigN: "CPU per fact"},
		{name: "ingest_while_watched_changing", unit: "µs", small: small.perFact, big: changing.perFact,
			smallN: "wall per fact, none watch", bigN: "every burst a verdict change"},
		{name: "store_bytes_per_fact", unit: "B", small: f.sizes[0].bytesPerFact(), big: f.sizes[1].bytesPerFact(),
			smallN: fmt.Sprintf("%d rows", f.sizes[0].Facts), bigN: fmt.Sprintf("%d rows", f.sizes[1].Facts)},
	}
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

// dormancyDesc says what watching verifications sleep through outside the
// worker.
func dormancyDesc(d workflows.Dormancy) string {
	if !d.Enabled() {
		return "no dormancy"
	}
	return fmt.Sprintf("dormant through waits of %s or more from %s old", d.MinWait, d.MinAge)
}
