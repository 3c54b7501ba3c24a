package loadtest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/workflows"
)

// watchCase is one case of open_verifications and ingest_while_watched.
type watchCase struct {
	pass    []time.Duration
	heap    float64 // MiB in use after a GC
	perFact float64 // ingest wall µs per fact
	cpuFact float64 // ingest CPU µs per fact, every process
}

// watchCases are the small case (0), the big one (1), and the big one's
// ingest once more with every burst changing its verdict.
type watchCases struct {
	cases    [2]watchCase
	changing watchCase
}

// openVerifications measures, in the bench tenant, a pass and this
// process's heap with SmallWatching and then Watching verifications
// watching, and the ingest on nobody's subjects and then on the watched
// ones.
func (sc *scale) openVerifications(ctx context.Context) (watchCases, error) {
	var out watchCases
	t := sc.bench
	// What a watching verification spends awake before it sleeps
	// (workflows/dormant.go); the EqualWork verifications are awake as
	// long, then finish.
	awake := 2 * time.Minute
	if sc.s.Dormancy.Enabled() {
		awake = sc.s.Dormancy.MinAge
	}
	for _, c := range [][3]string{{"bench_payout", "10m", "0s"}, {"bench_watch", "10m", "2h"}, {"bench_brief", "10m", (awake + time.Minute).String()}} {
		if _, _, err := t.api.PutContract(ctx, payoutContract(c[0], c[1], c[2])); err != nil {
			return out, err
		}
	}
	if _, err := loadFacts(ctx, sc.s.DB, t.id, tenantFacts("acc", 2*sc.c.Probes, 4*sc.c.Probes, sc.requestedAt)); err != nil {
		return out, err
	}
	if _, err := loadFacts(ctx, sc.s.DB, t.id, tenantFacts("w", sc.c.Watching, 2*sc.c.Watching, sc.requestedAt)); err != nil {
		return out, err
	}
	if _, err := noticesDrained(ctx, sc.s.DB, t.id); err != nil {
		return out, err
	}
	for i, n := range []int{sc.c.SmallWatching, sc.c.Watching} {
		if i == 0 && sc.c.EqualWork {
			if err := sc.equalWork(ctx, awake); err != nil {
				return out, err
			}
		}
		if err := sc.addWatchers(ctx, n); err != nil {
			return out, err
		}
		c, err := sc.measureWatching(ctx)
		if err != nil {
			return out, err
		}
		// Ingest: on nobody's subjects in the small case, on the watched
		// subjects in the big one (notes: facts that change no verdict).
		ic := ingestCase{label: "unwatched", prefix: "u", round: i}
		if i == 1 {
			ic = ingestCase{label: "watched", prefix: "w", round: i}
		}
		if c.perFact, c.cpuFact, err = sc.measureIngest(ctx, ic); err != nil {
			return out, err
		}
		out.cases[i] = c
	}
	// The same bursts on the same watched subjects once more, each one a
	// fact that changes its verification's verdict (a second payout): no
	// screen can spare these wakes, so this is the wake path's own cost.
	var err error
	out.changing.perFact, out.changing.cpuFact, err = sc.measureIngest(ctx,
		ingestCase{label: "watched, every burst changing its verdict", prefix: "w", round: 2, changing: true})
	return out, err
}

// equalWork starts as many verifications as the big case has watching
// and lets them finish, each awake as long as a watcher is before it
// sleeps: both heaps are then taken after the same work, and differ by
// what the watching verifications hold.
func (sc *scale) equalWork(ctx context.Context, awake time.Duration) error {
	fresh, _, _ := heapMiB()
	start := time.Now()
	ids, err := sc.bench.startBrief(ctx, sc.c.Watching)
	if err != nil {
		// The ones started are ended by the cleanup, as watchers are:
		// their tenant is deleted under them.
		sc.watchers = append(sc.watchers, ids...)
		return err
	}
	fmt.Fprintf(sc.w, "  equal work: this process's heap %.1f MiB before any verification; then %d verifications started in %s, each awake %s and finished (closed %s after the last start)\n",
		fresh, len(ids), time.Since(start).Round(time.Millisecond), awake, sc.bench.waitClosed(ctx, ids, awake+5*time.Minute).Round(time.Second))
	return nil
}

// addWatchers starts n more watching verifications, and waits until
// they are asleep (with dormancy) and the worker and Temporal are idle.
func (sc *scale) addWatchers(ctx context.Context, n int) error {
	start := time.Now()
	ids, err := sc.bench.startWatchers(ctx, len(sc.watchers), n, sc.requestedAt)
	sc.watchers = compactIDs(append(sc.watchers, ids...))
	if err != nil {
		return err
	}
	// Their verdicts are stored, but their workflows still have steps to
	// take (search attributes, the watch's timer): measure once the worker
	// is idle again, not behind that queue. Watching verifications sleep
	// outside the worker once old enough (workflows/dormant.go): measure
	// them asleep, as they spend nearly all of a watch.
	started := time.Since(start)
	asleep := "dormancy off: awake"
	if sc.s.Dormancy.Enabled() {
		took, awake, err := sc.bench.waitAsleep(ctx, sc.watchers, sc.s.Dormancy.MinAge+5*time.Minute)
		if err != nil {
			return err
		}
		asleep = fmt.Sprintf("asleep outside the worker %s after, %d of a sample of %d still awake", took.Round(time.Second), awake, min(100, len(sc.watchers)))
	}
	quiet := sc.waitQuiet(ctx, 3*time.Minute)
	fmt.Fprintf(sc.w, "  %d verifications watching (%d started in %s; %s; the worker and Temporal idle %s after)\n", len(sc.watchers), len(ids),
		started.Round(time.Millisecond), asleep, quiet.Round(time.Second))
	return nil
}

// measureWatching probes passes with the watchers in place and reads this
// process's heap.
func (sc *scale) measureWatching(ctx context.Context) (watchCase, error) {
	var c watchCase
	// Fresh statistics first: this tenant grew after the last ANALYZE, and
	// with stale ones the planner takes it for a tenant of one row and
	// scans all its facts: that is the cost of stale statistics, not of
	// open verifications. And the tables the starts wrote to vacuumed now,
	// not by an autovacuum worker in the middle of the probes.
	if _, err := vacuum(ctx, sc.s.DB, "facts, actions, verdicts, fact_notifications"); err != nil {
		return c, err
	}
	// The starts left garbage behind: collected now, so that the
	// collection it would trigger (a mark of the whole heap) does not land
	// on the probes by chance; the cycles that run during them are counted.
	gc := startGC()
	var err error
	if c.pass, _, err = sc.bench.probe(ctx, sc.c.Probes, sc.requestedAt); err != nil {
		return c, err
	}
	fmt.Fprintf(sc.w, "    during the probes: %s\n", gc)
	var stacks, rss float64
	c.heap, stacks, rss = heapMiB()
	if err := writeHeapProfile(sc.c.Profile, len(sc.watchers)); err != nil {
		return c, err
	}
	fmt.Fprintf(sc.w, "    pass latency p50 %s p99 %s; this process (API and worker): heap %.1f MiB, stacks %.1f MiB, RSS %.1f MiB, %d goroutines\n",
		pct(c.pass, 50), pct(c.pass, 99), c.heap, stacks, rss, runtime.NumGoroutine())
	return c, nil
}

// startWatchers records n actions of bench_watch on account:w_<from>…,
// 16 at a time, and waits until each verification has its final verdict
// (it is watching then). When recording fails it returns the ids it
// recorded with the error.
func (t *tenant) startWatchers(ctx context.Context, from, n int, requestedAt time.Time) ([]string, error) {
	ids, err := t.record(ctx, n, func(i int) commitlayer.Action {
		return commitlayer.Action{Contract: "bench_watch", Subject: commitlayer.Subject(fmt.Sprintf("account:w_%d", from+i)), RequestedAt: requestedAt}
	})
	if err != nil {
		return ids, err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for pending := ids; len(pending) > 0; {
		var next []string
		for chunk := range slices.Chunk(pending, 1000) {
			stages, err := verdictStages(ctx, t.s.DB, t.id, chunk)
			if err != nil {
				return ids, err
			}
			for _, id := range chunk {
				if !stages[id] {
					next = append(next, id)
				}
			}
		}
		if pending = next; len(pending) > 0 {
			if time.Now().After(deadline) {
				return ids, fmt.Errorf("%d watching verifications without a final verdict after 10 minutes", len(pending))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return ids, nil
}

// startBrief starts n verifications on accounts account:b_<i> (which have
// no facts: each fails, as cheaply as another passes) on bench_brief:
// requested 11 minutes before its start, so settled at once, and watched
// for a while after it before it finishes. When recording fails it
// returns the ids it recorded with the error.
func (t *tenant) startBrief(ctx context.Context, n int) ([]string, error) {
	return t.record(ctx, n, func(i int) commitlayer.Action {
		return commitlayer.Action{Contract: "bench_brief", Subject: commitlayer.Subject(fmt.Sprintf("account:b_%d", i)),
			RequestedAt: time.Now().UTC().Add(-11 * time.Minute)}
	})
}

// record records n payouts of 100 by agent "bench" (action(i) gives the
// contract, subject and request time), 16 at a time, and returns their
// ids: on error, those it recorded.
func (t *tenant) record(ctx context.Context, n int, action func(i int) commitlayer.Action) ([]string, error) {
	ids := make([]string, n)
	err := closedLoopN(ctx, n, 16, func(ctx context.Context, i int) error {
		a := action(i)
		a.Agent, a.Params, a.Claim = "bench", commitlayer.Attrs{"amount": 100}, commitlayer.Claim{Status: commitlayer.ClaimSuccess}
		acc, err := t.api.RecordAction(ctx, a)
		ids[i] = acc.ID
		return err
	})
	if err != nil {
		return slices.DeleteFunc(ids, func(id string) bool { return id == "" }), err
	}
	return ids, nil
}

// waitClosed waits, at most max, until the verifications sampled from ids
// (up to 100, the last started among them) have closed, and returns how
// long that took.
func (t *tenant) waitClosed(ctx context.Context, ids []string, max time.Duration) time.Duration {
	start := time.Now()
	for _, id := range sampleLast(ids, 100) {
		for time.Since(start) < max && ctx.Err() == nil {
			d, err := t.s.Temporal.DescribeWorkflow(ctx, workflows.VerifyWorkflowID(t.id, id), "")
			if err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				break
			}
			time.Sleep(time.Second)
		}
	}
	return time.Since(start)
}

// waitAsleep waits, at most max, until the verifications sampled from ids
// (up to 100, the last started among them) sleep outside the worker
// (workflows/dormant.go: their current run has had no workflow task), and
// returns how long that took and how many of the sample still did not.
func (t *tenant) waitAsleep(ctx context.Context, ids []string, max time.Duration) (time.Duration, int, error) {
	start := time.Now()
	sample := sampleLast(ids, 100)
	for {
		awake := 0
		for _, id := range sample {
			d, err := t.s.Temporal.DescribeWorkflow(ctx, workflows.VerifyWorkflowID(t.id, id), "")
			if err != nil {
				return 0, 0, err
			}
			info := d.RawResponse.GetWorkflowExecutionInfo()
			if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && info.GetHistoryLength() > 1 {
				awake++
			}
		}
		if awake == 0 || time.Since(start) > max {
			return time.Since(start), awake, nil
		}
		time.Sleep(time.Second)
	}
}

// waitQuiet waits, at most max, until this process (API and worker) uses
// less than 15 % of a core over a second, the Temporal server less than
// 30 % (it digests a burst of starts after they answered: search
// attributes, timers), and no autovacuum runs in this database (the
// starts' rows, or a purge's dead ones, get vacuumed and analyzed a little
// later), and returns how long it waited. Postgres's CPU is not asked:
// other databases of the same server are not this run's.
func (sc *scale) waitQuiet(ctx context.Context, max time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < max && ctx.Err() == nil {
		before := cpuByRole(sc.ws)
		time.Sleep(time.Second)
		used := cpuByRole(sc.ws).since(before)
		if used["commitlayer"] < 0.15 && used["temporal"] < 0.30 && autovacuums(ctx, sc.s.DB) == 0 {
			break
		}
	}
	return time.Since(start)
}

// sampleLast picks up to n of ids, evenly, the last one first.
func sampleLast(ids []string, n int) []string {
	sample := make([]string, 0, n)
	step := len(ids)/max(n-1, 1) + 1
	for i := len(ids) - 1; i >= 0 && len(sample) < n; i -= step {
		sample = append(sample, ids[i])
	}
	return sample
}

// compactIDs returns ids sharing one allocation. Each id as the client
// decoded it is a string of its own, allocated among that response's
// garbage: kept for the whole run, 10⁴ of them hold as many spans of this
// process's heap in use, and the heap the load test measures for the
// worker would be its own bookkeeping.
func compactIDs(ids []string) []string {
	all := strings.Join(ids, "")
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i], all = all[:len(id)], all[len(id):]
	}
	return out
}
