package loadtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"golang.org/x/sync/errgroup"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/workflows"
)

// ingestCase is one ingest_while_watched case: its bursts go to subjects
// account:<prefix>_<k> (w: the watched ones), round tells its facts apart,
// changing makes each burst's first fact a second payout (a verdict
// change; else every fact is a note).
type ingestCase struct {
	label, prefix string
	round         int
	changing      bool
}

// measureIngest posts the case's batches, prints its figures, waits for
// every notice to be delivered and, on the watched subjects, for the
// wakes, and returns the wall and CPU time per fact.
func (sc *scale) measureIngest(ctx context.Context, ic ingestCase) (perFact, cpuFact float64, err error) {
	batches := ingestBatches(sc.c, ic)
	// Each case starts just after a checkpoint: the first write to a page
	// after one puts the whole page in the WAL, and a checkpoint that
	// happened to start during one case and not the other would be the
	// difference between the cases. Only a superuser (or pg_checkpoint)
	// may; without it the case runs as it finds the server.
	start := time.Now()
	if _, err := sc.s.DB.Pool().Exec(ctx, `CHECKPOINT`); err != nil {
		fmt.Fprintf(sc.w, "    CHECKPOINT before the POSTs refused (%v): the WAL's state is as found\n", err)
	} else {
		fmt.Fprintf(sc.w, "    CHECKPOINT before the POSTs: %s\n", time.Since(start).Round(time.Millisecond))
	}
	stopProfile, err := startIngestProfile(sc.c.Profile, ic.round)
	if err != nil {
		return 0, 0, err
	}
	gc := startGC()
	cpu0 := cpuByRole(sc.ws)
	ingestCPU := startCPU(sc.ws)
	ingestStart := time.Now()
	lat, err := sc.bench.ingest(ctx, sc.c.InFlight, batches)
	if err != nil {
		stopProfile()
		return 0, 0, err
	}
	wall := time.Since(ingestStart)
	cpu := cpuTotal(cpuByRole(sc.ws).since(cpu0))
	facts := float64(sc.c.Batches * sc.c.Batch)
	perFact, cpuFact = 1e6*wall.Seconds()/facts, 1e6*cpu/facts
	fmt.Fprintf(sc.w, "    POST /v1/facts on %s subjects: %d batches of %d (%d facts per subject), %d in flight: %.0f facts/s, batch p50 %s p99 %s; CPU %.1f µs per fact (API, worker, Temporal, Postgres)\n",
		ic.label, sc.c.Batches, sc.c.Batch, sc.c.Burst, sc.c.InFlight, facts/wall.Seconds(), pct(lat, 50), pct(lat, 99), cpuFact)
	fmt.Fprintf(sc.w, "    while posting:%s", strings.TrimPrefix(ingestCPU.capture(wall), " "))
	fmt.Fprintf(sc.w, "    while posting: %s\n", gc)
	postCPU := startCPU(sc.ws)
	drained, err := noticesDrained(ctx, sc.s.DB, sc.bench.id)
	stopProfile()
	if err != nil {
		return 0, 0, err
	}
	drainCPU := "" // over less than a second the shares say nothing
	if drained >= time.Second {
		drainCPU = "; " + strings.TrimSpace(postCPU.capture(drained))
	}
	fmt.Fprintf(sc.w, "    last POST → every notice of new facts delivered: %s%s; first POST → every notice delivered: %.0f facts/s\n",
		drained.Round(time.Millisecond), drainCPU, facts/(wall+drained).Seconds())
	if ic.prefix == "w" {
		sig, err := sc.signalsPerBurst(ctx, ingestStart)
		if err != nil {
			return 0, 0, err
		}
		fmt.Fprintf(sc.w, "    new-facts signals: %s\n", sig)
	}
	return perFact, cpuFact, nil
}

// ingestBatches makes c.Batches batches of c.Batch facts, each batch
// c.Burst facts on each of its subjects account:<prefix>_<k>, k cycling
// through the c.Watching subjects.
func ingestBatches(c ScaleConfig, ic ingestCase) [][]commitlayer.Fact {
	perBatch := c.Batch / c.Burst
	now := time.Now().UTC().Add(-time.Minute)
	batches := make([][]commitlayer.Fact, c.Batches)
	for j := range batches {
		facts := make([]commitlayer.Fact, 0, c.Batch)
		for s := 0; len(facts) < c.Batch; s++ {
			acc := commitlayer.Subject(fmt.Sprintf("account:%s_%d", ic.prefix, (j*perBatch+s)%c.Watching))
			for k := 0; k < c.Burst && len(facts) < c.Batch; k++ {
				fact := commitlayer.Fact{Source: "ledger", Type: "note_added", Subject: acc,
					ExternalID: fmt.Sprintf("ing-%d-%d-%d-%d", ic.round, j, s, k), OccurredAt: now,
					Attrs: commitlayer.Attrs{"n": k, "text": "statement line"}}
				if ic.changing && k == 0 {
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

// ingest posts the batches, inFlight at once, through the tenant's
// client, and returns each POST's latency. The batches are made before
// (ingestBatches), so what is timed is the client's calls, not the
// fixture's.
func (t *tenant) ingest(ctx context.Context, inFlight int, batches [][]commitlayer.Fact) ([]time.Duration, error) {
	lat := make([]time.Duration, len(batches))
	err := closedLoopN(ctx, len(batches), inFlight, func(ctx context.Context, j int) error {
		start := time.Now()
		if _, err := t.api.PostFacts(ctx, batches[j]); err != nil {
			return err
		}
		lat[j] = time.Since(start)
		return nil
	})
	return lat, err
}

// signalsPerBurst reads the histories of up to 50 watching verifications
// and compares the new-facts signals they got since since with the bursts
// of facts posted on their subjects; then it reads them again until each
// has completed a workflow task after its last signal (its wake has run),
// at most 3 minutes, and says how long after the first reading that was.
func (sc *scale) signalsPerBurst(ctx context.Context, since time.Time) (string, error) {
	c := sc.c
	perBatch := c.Batch / c.Burst
	bursts := map[int]int{} // watcher index → bursts on its subject
	for j := range c.Batches {
		for s := range perBatch {
			bursts[(j*perBatch+s)%c.Watching]++
		}
	}
	step := max(len(sc.watchers)/50, 1)
	var idx []int
	var got int64
	for i := 0; i < len(sc.watchers); i += step {
		idx = append(idx, i)
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
				w, err := sc.bench.wakes(gctx, workflows.VerifyWorkflowID(sc.bench.id, sc.watchers[i]), since)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil && ctx.Err() == nil:
					// Read again next time; until then not known to be woken.
					unread++
					waiting++
				case err != nil:
					return err
				default:
					signals += w.signals
					tasks += w.tasks
					if !w.woken {
						waiting++
					}
				}
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
		float64(signals)/float64(got), float64(tasks)/float64(got), c.Burst, len(idx), got, float64(signals)/float64(got)*float64(perBatch), waiting)
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

func (t *tenant) wakes(ctx context.Context, workflowID string, since time.Time) (wake, error) {
	// A verification that sleeps outside the worker (workflows/dormant.go)
	// is a new run at every wake: read the runs back from the current one
	// (each started event names the run it continued) to the first that
	// started before since, then count them oldest first.
	var runs [][]*historypb.HistoryEvent
	runID := ""
	for {
		var events []*historypb.HistoryEvent
		it := t.s.Temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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
