package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"golang.org/x/sync/errgroup"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/workflows"
	"github.com/jackc/pgx/v5"
)

// tenantFacts yields n facts over subjects accounts account:<prefix>_<i>,
// each with its opening (linking its customer, 90 days before
// requestedAt), its payout a second after requestedAt, and balance changes
// spread over the 90 days between: a tenant's history, not a pile on one
// subject.
func tenantFacts(prefix string, subjects, n int, requestedAt time.Time) func() (commitlayer.Fact, bool, error) {
	per, extra := n/subjects, n%subjects
	i, j := 0, 0 // subject, fact of the subject
	span := 90 * 24 * time.Hour
	return func() (commitlayer.Fact, bool, error) {
		if i == subjects {
			return commitlayer.Fact{}, false, nil
		}
		k := per
		if i < extra {
			k++
		}
		acc := commitlayer.Subject(fmt.Sprintf("account:%s_%d", prefix, i))
		id := prefix + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
		var f commitlayer.Fact
		switch j {
		case 0:
			f = commitlayer.Fact{Source: "ledger", Type: "account_opened", Subject: acc, ExternalID: id,
				OccurredAt: requestedAt.Add(-span), Attrs: commitlayer.Attrs{"status": "active"},
				Links: []commitlayer.Subject{commitlayer.Subject(fmt.Sprintf("customer:%s_c%d", prefix, i))}}
		case 1:
			f = commitlayer.Fact{Source: "ledger", Type: "payout_sent", Subject: acc, ExternalID: id,
				OccurredAt: requestedAt.Add(time.Second), Attrs: commitlayer.Attrs{"amount": 100}}
		default:
			at := requestedAt.Add(-span + time.Duration(j)*span/time.Duration(k+1))
			f = commitlayer.Fact{Source: "ledger", Type: "balance_changed", Subject: acc, ExternalID: id,
				OccurredAt: at, Attrs: commitlayer.Attrs{"delta": j, "balance": 1000 + j}}
		}
		if j++; j == k {
			i, j = i+1, 0
		}
		return f, true, nil
	}
}

// probe verifies n actions on account:acc_0…, one at a time, and returns
// their passes' latency as the worker stored it on the final verdict, and
// POST → final verdict.
func (b *benchmarker) probe(ctx context.Context, n int, requestedAt time.Time) (pass, e2e []time.Duration, err error) {
	samples, err := b.closedLoop(ctx, n, 1, requestedAt)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(samples))
	for i, s := range samples {
		ids[i] = s.id
		e2e = append(e2e, s.last.Sub(s.posted))
	}
	rows, err := b.m.DB.Pool().Query(ctx, `SELECT DISTINCT ON (action_id) pass_us FROM verdicts
		WHERE tenant_id = $1 AND action_id = ANY($2) AND pass_us IS NOT NULL ORDER BY action_id, version DESC`, b.tenant, ids)
	if err != nil {
		return nil, nil, err
	}
	us, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, nil, err
	}
	for _, u := range us {
		pass = append(pass, time.Duration(u)*time.Microsecond)
	}
	if len(pass) == 0 {
		return nil, nil, errors.New("no verdict carries its pass latency")
	}
	// The next probe of the tenant verifies the next accounts.
	b.probeBase += n
	return pass, e2e, nil
}

// startWatchers records n actions of bench_watch on account:w_<from>…,
// 16 at a time, and waits until each verification has its final verdict
// (it is watching then). When recording fails it returns the ids it
// recorded (recordedIDs) with the error.
func (b *benchmarker) startWatchers(ctx context.Context, from, n int, requestedAt time.Time) ([]string, error) {
	ids := make([]string, n)
	err := closedLoopN(ctx, n, 16, func(ctx context.Context, i int) error {
		acc, err := b.api.RecordAction(ctx, commitlayer.Action{
			Contract: "bench_watch", Agent: "bench", Subject: commitlayer.Subject(fmt.Sprintf("account:w_%d", from+i)),
			Params: commitlayer.Attrs{"amount": 100}, RequestedAt: requestedAt,
			Claim: commitlayer.Claim{Status: commitlayer.ClaimSuccess},
		})
		ids[i] = acc.ID
		return err
	})
	if err != nil {
		return recordedIDs(ids), err
	}
	deadline := time.Now().Add(10 * time.Minute)
	pending := ids
	for len(pending) > 0 {
		var next []string
		for c := 0; c < len(pending); c += 1000 {
			chunk := pending[c:min(c+1000, len(pending))]
			stages, err := b.m.DB.VerdictStages(ctx, b.tenant, chunk)
			if err != nil {
				return nil, err
			}
			for _, id := range chunk {
				if final := stages[id]; !final {
					next = append(next, id)
				}
			}
		}
		if pending = next; len(pending) > 0 {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%d watching verifications without a final verdict after 10 minutes", len(pending))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return ids, nil
}

// startBrief starts n verifications on accounts account:b_<i> (which have
// no facts: each fails, as cheaply as another passes) on bench_brief:
// requested 11 minutes before its start, so settled at once and watched
// for awake after it. Each stays in the worker for awake, as a watcher
// does before it sleeps, then finishes. When recording fails it returns
// the ids it recorded (recordedIDs) with the error.
func (b *benchmarker) startBrief(ctx context.Context, n int, awake time.Duration) ([]string, error) {
	ids := make([]string, n)
	err := closedLoopN(ctx, n, 16, func(ctx context.Context, i int) error {
		acc, err := b.api.RecordAction(ctx, commitlayer.Action{
			Contract: "bench_brief", Agent: "bench", Subject: commitlayer.Subject(fmt.Sprintf("account:b_%d", i)),
			Params: commitlayer.Attrs{"amount": 100}, RequestedAt: time.Now().UTC().Add(-11 * time.Minute),
			Claim: commitlayer.Claim{Status: commitlayer.ClaimSuccess},
		})
		ids[i] = acc.ID
		return err
	})
	if err != nil {
		return recordedIDs(ids), err
	}
	return ids, nil
}

// recordedIDs is ids without the empty ones of actions a failed start did
// not record: what the caller's cleanup has to end.
func recordedIDs(ids []string) []string {
	return slices.DeleteFunc(ids, func(id string) bool { return id == "" })
}

// waitClosed waits, at most max, until the verifications sampled from ids
// (up to 100, the last started among them) have closed, and returns how
// long that took.
func (b *benchmarker) waitClosed(ctx context.Context, ids []string, max time.Duration) time.Duration {
	start := time.Now()
	for _, id := range sampleLast(ids, 100) {
		for time.Since(start) < max && ctx.Err() == nil {
			d, err := b.m.Temporal.DescribeWorkflow(ctx, workflows.VerifyWorkflowID(b.tenant, id), "")
			if err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				break
			}
			time.Sleep(time.Second)
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
// garbage: kept for the whole run, 10⁴ of them hold as many spans of
// this process's heap in use (2.8 MB of live objects held ~10 MiB of
// spans at 10⁴ watching), and the heap the bench measures for the
// worker would be the bench's own bookkeeping.
func compactIDs(ids []string) []string {
	n := 0
	for _, id := range ids {
		n += len(id)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, id := range ids {
		sb.WriteString(id)
	}
	all := sb.String()
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i], all = all[:len(id)], all[len(id):]
	}
	return out
}

// ingestBatches makes f.batches batches of f.batch facts, each batch
// f.burst facts on each of its subjects account:<prefix>_<k>, k cycling
// through pool.
func ingestBatches(f scaleFlags, prefix string, pool, round int, changing bool) [][]commitlayer.Fact {
	perBatch := f.batch / f.burst
	now := time.Now().UTC().Add(-time.Minute)
	batches := make([][]commitlayer.Fact, f.batches)
	for j := range batches {
		facts := make([]commitlayer.Fact, 0, f.batch)
		for s := 0; len(facts) < f.batch; s++ {
			acc := commitlayer.Subject(fmt.Sprintf("account:%s_%d", prefix, (j*perBatch+s)%pool))
			for k := 0; k < f.burst && len(facts) < f.batch; k++ {
				fact := commitlayer.Fact{Source: "ledger", Type: "note_added", Subject: acc,
					ExternalID: fmt.Sprintf("ing-%d-%d-%d-%d", round, j, s, k), OccurredAt: now,
					Attrs: commitlayer.Attrs{"n": k, "text": "statement line"}}
				if changing && k == 0 {
					// A second payout: the effect's count breaks.
					fact.Type, fact.Attrs = "payout_sent", commitlayer.Attrs{"amount": 100}
				}
				facts = append(facts, fact)
			}
		}
		batches[j] = facts
	}
	return batches
}

// ingest posts the batches, f.inFlight at once, through the tenant's
// client, and returns each POST's latency. The batches are made before
// (ingestBatches), so what the caller times is the client's calls, not
// the fixture's.
func (b *benchmarker) ingest(ctx context.Context, f scaleFlags, batches [][]commitlayer.Fact) ([]time.Duration, error) {
	lat := make([]time.Duration, len(batches))
	err := closedLoopN(ctx, len(batches), f.inFlight, func(ctx context.Context, j int) error {
		start := time.Now()
		if _, err := b.api.PostFacts(ctx, batches[j]); err != nil {
			return err
		}
		lat[j] = time.Since(start)
		return nil
	})
	return lat, err
}

// noticesDrained waits (up to 5 minutes) until the tenant's outbox of
// fact notices is empty, and returns how long that took.
func (b *benchmarker) noticesDrained(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	for {
		var n int
		if err := b.m.DB.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_notifications WHERE tenant_id = $1`, b.tenant).Scan(&n); err != nil {
			return 0, err
		}
		if n == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("%d notices of new facts still undelivered after 5 minutes", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signalsPerBurst reads the histories of up to 50 watching verifications
// and compares the new-facts signals they got since since with the bursts
// of facts posted on their subjects; then it reads them again until each
// has completed a workflow task after its last signal (its wake has run),
// at most 3 minutes, and says how long after the first reading that was.
func (b *benchmarker) signalsPerBurst(ctx context.Context, f scaleFlags, watchers []string, since time.Time) (string, error) {
	perBatch := f.batch / f.burst
	bursts := map[int]int{} // watcher index → bursts on its subject
	for j := range f.batches {
		for s := range perBatch {
			bursts[(j*perBatch+s)%f.watching]++
		}
	}
	step := max(len(watchers)/50, 1)
	var idx []int
	for i := 0; i < len(watchers); i += step {
		idx = append(idx, i)
	}
	var got int64
	for _, i := range idx {
		got += int64(bursts[i])
	}
	if got == 0 {
		return "no burst reached the sampled verifications", nil
	}
	unread := 0 // histories a reading could not fetch (a busy server's timeout)
	read := func() (signals, tasks int64, waiting int, err error) {
		var mu sync.Mutex
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		unread = 0
		for _, i := range idx {
			g.Go(func() error {
				w, err := b.wakes(gctx, workflows.VerifyWorkflowID(b.tenant, watchers[i]), since)
				if err != nil && ctx.Err() == nil {
					// Read again next time; until then not known to be woken.
					mu.Lock()
					unread++
					waiting++
					mu.Unlock()
					return nil
				}
				if err != nil {
					return err
				}
				mu.Lock()
				signals += w.signals
				tasks += w.tasks
				if !w.woken {
					waiting++
				}
				mu.Unlock()
				return nil
			})
		}
		err = g.Wait()
		return signals, tasks, waiting, err
	}
	signals, tasks, waiting, err := read()
	if err != nil {
		return "", err
	}
	out := fmt.Sprintf("%.2f signals and %.2f workflow tasks per burst of %d facts on a watched subject (%d verifications sampled, %d bursts); ≈ %.0f signals per batch; %d of the sampled not woken yet",
		float64(signals)/float64(got), float64(tasks)/float64(got), f.burst, len(idx), got, float64(signals)/float64(got)*float64(perBatch), waiting)
	start := time.Now()
	for waiting > 0 && time.Since(start) < 3*time.Minute {
		time.Sleep(2 * time.Second)
		if _, tasks, waiting, err = read(); err != nil {
			return "", err
		}
	}
	if waiting > 0 {
		return out + fmt.Sprintf("; %d still not woken 3 minutes later (%d of them histories Temporal did not answer in time)", waiting, unread), nil
	}
	return out + fmt.Sprintf("; every sampled wake ran %s later (%.2f workflow tasks per burst then)",
		time.Since(start).Round(100*time.Millisecond), float64(tasks)/float64(got)), nil
}

// wake is what one verification's history shows since a time: the
// facts-arrived signals, the workflow tasks completed, and whether one
// completed after the last signal.
type wake struct {
	signals, tasks int64
	woken          bool
}

func (b *benchmarker) wakes(ctx context.Context, workflowID string, since time.Time) (wake, error) {
	// A verification that sleeps outside the worker (workflows/dormant.go)
	// is a new run at every wake: read the runs back from the current one
	// (each started event names the run it continued) to the first that
	// started before since, then count them oldest first.
	var runs [][]*historypb.HistoryEvent
	runID := ""
	for {
		var events []*historypb.HistoryEvent
		it := b.m.Temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return wake{}, err
			}
			events = append(events, e)
		}
		runs = append(runs, events)
		if len(events) == 0 || events[0].GetEventTime().AsTime().Before(since) {
			break
		}
		if runID = events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(); runID == "" {
			break
		}
	}
	w := wake{woken: true}
	for _, events := range slices.Backward(runs) {
		for _, e := range events {
			if e.GetEventTime().AsTime().Before(since) {
				continue
			}
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				w.signals++
				w.woken = false
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				w.tasks++
				w.woken = true
			}
		}
	}
	return w, nil
}

// waitAsleep waits, at most max, until the verifications sampled from ids
// (up to 100, the last started among them) sleep outside the worker
// (workflows/dormant.go: their current run has had no workflow task), and
// returns how long that took and how many of the sample still did not.
// They sleep once old enough (COMMITLAYER_DORMANT_MIN_AGE).
func (b *benchmarker) waitAsleep(ctx context.Context, ids []string, max time.Duration) (time.Duration, int, error) {
	start := time.Now()
	sample := sampleLast(ids, 100)
	for {
		awake := 0
		for _, id := range sample {
			d, err := b.m.Temporal.DescribeWorkflow(ctx, workflows.VerifyWorkflowID(b.tenant, id), "")
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
// attributes, timers), and no autovacuum runs in this database (the starts'
// rows, or a purge's dead ones, get vacuumed and analyzed a little later),
// and returns how long it waited. Postgres's CPU is not asked: other
// databases of the same server are not this run's.
func (b *benchmarker) waitQuiet(ctx context.Context, max time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < max && ctx.Err() == nil {
		before := cpuByRole()
		time.Sleep(time.Second)
		used := cpuByRole().since(before)
		if used["commitlayer"] < 0.15 && used["temporal"] < 0.30 && b.autovacuums(ctx) == 0 {
			break
		}
	}
	return time.Since(start)
}

// autovacuums is how many autovacuum workers are at work in this
// database now (0 when that cannot be read).
func (b *benchmarker) autovacuums(ctx context.Context) int {
	var n int
	_ = b.m.DB.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'autovacuum worker' AND datname = current_database()`).Scan(&n)
	return n
}

// heapMiB returns this process's heap in use after a GC, its goroutines'
// stacks, and its RSS.
func heapMiB() (heap, stacks, rss float64) {
	// A collection, and the pages it freed handed back to the system now
	// rather than by the scavenger later: the RSS is then what the process
	// holds.
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = float64(ms.HeapInuse) / (1 << 20)
	stacks = float64(ms.StackInuse) / (1 << 20)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				rss = kb / 1024
			}
		}
	}
	return heap, stacks, rss
}

// cpuTotal sums what every role used in a snapshot's window.
func cpuTotal(used map[string]float64) float64 {
	var t float64
	for _, v := range used {
		t += v
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mib(b int64) float64        { return float64(b) / (1 << 20) }

func bytesPerFact(s postgres.StoreSize) float64 {
	if s.Facts == 0 {
		return math.NaN()
	}
	return float64(s.TableBytes+s.IndexBytes) / float64(s.Facts)
}

// factIndexes are the facts table's indexes, in the order indexSizes
// prints them.
var factIndexes = []string{"facts_pkey", "facts_tenant_id_source_external_id_key", "facts_subject", "facts_kind", "facts_link_keys", "facts_linked_subject"}

func indexSizes(ix map[string]int64) string {
	var parts []string
	for _, name := range factIndexes {
		if v, ok := ix[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", strings.TrimPrefix(name, "facts_"), mib(v)))
		}
	}
	for name, v := range ix {
		if !slices.Contains(factIndexes, name) {
			parts = append(parts, fmt.Sprintf("%s %.1f", strings.TrimPrefix(name, "facts_"), mib(v)))
		}
	}
	return strings.Join(parts, ", ")
}
