// Package loadtest is `commitlayer bench`: it measures CommitLayer end to
// end on the local services, each figure next to a baseline measured in
// the same run on the same server, worker(s) and task queue.
//
//	verify  POST /v1/actions → first and final verdict stored, for actions
//	        whose settlement window has already closed, against a no-op
//	        workflow (start → complete) with the same clients;
//	settle  that many verifications at once, each waiting on a settlement
//	        timer, against as many workflows that only sleep as long;
//	scale   how a verification's cost grows with the work around it (scale.go).
//
// cmd/commitlayer starts the process it measures (a Stack: the API and a
// worker on a task queue of their own, the baselines registered beside the
// product's workflows: RegisterBaselines) and, for -workers N, N-1 more
// worker processes (workers.go). Every call a user would make goes through
// the product's client; the store is read only to watch verdicts land.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	clclient "github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/workflows"
)

// Stack is the CommitLayer process under load, started by cmd: its API,
// its store, its Temporal client, and the worker polling TaskQueue (with
// the baselines registered) and what it was configured with.
type Stack struct {
	URL, AdminKey string
	DB            *postgres.DB
	Temporal      client.Client
	TaskQueue     string
	Verifier      *verify.Client
	Activities    *activities.Activities
	// The process's settings the figures depend on, printed with them.
	StickyCacheSize int
	Dormancy        workflows.Dormancy
	// WorkerCommand makes the command of one more worker process on
	// TaskQueue (`commitlayer bench worker` with this process's settings),
	// for -workers N.
	WorkerCommand func() *exec.Cmd
}

// Config is a verify or settle run.
type Config struct {
	Mode        string // "verify" or "settle"
	Actions     int
	Concurrency int           // POSTs in flight
	Window      time.Duration // settle: each verification's settlement window
	Workers     int           // worker processes on the queue: this one and Workers-1 more
}

// Check refuses a run that cannot be made, naming the flag.
func (c Config) Check() error {
	switch {
	case c.Mode != "verify" && c.Mode != "settle":
		return fmt.Errorf("mode is verify or settle, not %q", c.Mode)
	case c.Actions < 1 || c.Concurrency < 1:
		return errors.New("-actions and -concurrency must be at least 1")
	case c.Window <= 0:
		return errors.New("-window must be positive")
	case c.Workers < 1 || c.Workers > 16:
		return errors.New("-workers must be 1 to 16")
	}
	return nil
}

// Run runs a verify or settle measurement and prints it to w, ratios to
// the baseline first.
func Run(ctx context.Context, s *Stack, c Config, w io.Writer) error {
	if err := c.Check(); err != nil {
		return err
	}
	ws, err := startWorkers(ctx, s, c.Workers)
	defer ws.stop()
	if err != nil {
		return err
	}
	t, err := newTenant(ctx, s, "bench")
	if err != nil {
		return err
	}
	if c.Mode == "verify" {
		return t.verify(ctx, w, c.Actions, c.Concurrency, ws)
	}
	return t.settle(ctx, w, c.Actions, c.Concurrency, c.Window, ws)
}

// tenant is a fresh tenant of the stack and its client: the calls a user
// makes.
type tenant struct {
	s   *Stack
	id  string
	api *clclient.Client
	// probeBase is postAction's first account (a tenant is probed more
	// than once).
	probeBase int
}

// newTenant creates a tenant through the admin API. Its client has no
// retries, so a failure shows instead of being absorbed into the
// latencies, and one pool for the concurrent calls.
func newTenant(ctx context.Context, s *Stack, name string) (*tenant, error) {
	hc := clclient.WithHTTPClient(&http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	once := clclient.WithRetry(clclient.RetryPolicy{MaxAttempts: 1})
	admin, err := clclient.New(s.URL, s.AdminKey, hc, once)
	if err != nil {
		return nil, err
	}
	created, err := admin.CreateTenant(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("create tenant %s: %w", name, err)
	}
	api, err := clclient.New(s.URL, created.APIKey, hc, once)
	if err != nil {
		return nil, err
	}
	cpuDatabase.Store(s.DB.Pool().Config().ConnConfig.Database)
	return &tenant{s: s, id: created.ID, api: api}, nil
}

// payoutContract is the bench's payout contract with its id, settlement
// and watch window: bench_payout (no watch) or, with a watch, bench_watch
// (its verifications stay open for the window).
func payoutContract(id, settlement, watch string) []byte {
	return fmt.Appendf(nil, `id: %s
kind: action
subject: account
settlement: %s
watch: %s
sources: [ledger]
policy:
  - id: active
    rule: state.ledger.status == 'active'
effects:
  - id: payout
    source: ledger
    type: payout_sent
    count: 1
    expect: effect.amount == params.amount
`, id, settlement, watch)
}

// setup posts the contract and, per account, its opening and its payout.
func (t *tenant) setup(ctx context.Context, n int, settlement time.Duration, requestedAt time.Time) error {
	if _, _, err := t.api.PutContract(ctx, payoutContract("bench_payout", settlement.String(), "0s")); err != nil {
		return err
	}
	var facts []commitlayer.Fact
	for i := range n {
		acc := commitlayer.Subject(fmt.Sprintf("account:acc_%d", i))
		facts = append(facts,
			commitlayer.Fact{Source: "ledger", Type: "account_opened", Subject: acc, ExternalID: "open-" + strconv.Itoa(i),
				OccurredAt: requestedAt.Add(-time.Hour), Attrs: commitlayer.Attrs{"status": "active"}},
			commitlayer.Fact{Source: "ledger", Type: "payout_sent", Subject: acc, ExternalID: "po-" + strconv.Itoa(i),
				OccurredAt: requestedAt.Add(time.Second), Attrs: commitlayer.Attrs{"amount": 100}})
		if len(facts) >= 1000 || i == n-1 {
			if _, err := t.api.PostFacts(ctx, facts); err != nil {
				return err
			}
			facts = facts[:0]
		}
	}
	return nil
}

// postAction records the bench payout on account acc_i.
func (t *tenant) postAction(ctx context.Context, i int, requestedAt time.Time) (string, error) {
	acc, err := t.api.RecordAction(ctx, commitlayer.Action{
		Contract: "bench_payout", Agent: "bench", Subject: commitlayer.Subject(fmt.Sprintf("account:acc_%d", t.probeBase+i)),
		Params: commitlayer.Attrs{"amount": 100}, RequestedAt: requestedAt.UTC(),
		Claim: commitlayer.Claim{Status: commitlayer.ClaimSuccess},
	})
	return acc.ID, err
}

type sample struct {
	id          string
	posted      time.Time
	answered    time.Time // the POST's 202 (action stored, verification started)
	first, last time.Time // first verdict, final verdict seen
}

// seen marks what stages says of the sample at now.
func (s *sample) seen(stages map[string]bool, now time.Time) {
	final, ok := stages[s.id]
	if !ok {
		return
	}
	if s.first.IsZero() {
		s.first = now
	}
	if final && s.last.IsZero() {
		s.last = now
	}
}

// closedLoop runs conc clients, each posting an action and waiting for its
// final verdict before posting the next: latency without a queue in front.
func (t *tenant) closedLoop(ctx context.Context, n, conc int, requestedAt time.Time) ([]*sample, error) {
	samples := make([]*sample, n)
	err := closedLoopN(ctx, n, conc, func(ctx context.Context, i int) error {
		s := &sample{posted: time.Now()}
		id, err := t.postAction(ctx, i, requestedAt)
		if err != nil {
			return err
		}
		s.id, s.answered = id, time.Now()
		deadline := time.Now().Add(time.Minute)
		for s.last.IsZero() {
			stages, err := verdictStages(ctx, t.s.DB, t.id, []string{s.id})
			if err != nil {
				return err
			}
			s.seen(stages, time.Now())
			if time.Now().After(deadline) {
				return fmt.Errorf("action %s: no final verdict within a minute", s.id)
			}
			time.Sleep(time.Millisecond)
		}
		samples[i] = s
		return nil
	})
	return samples, err
}

// openLoop posts n actions (conc at a time), each requested at the moment
// it is posted, and watches the store until each has a final verdict.
func (t *tenant) openLoop(ctx context.Context, n, conc int) ([]*sample, error) {
	samples := make([]*sample, n)
	var mu sync.Mutex
	posted := make(chan error, 1)
	go func() {
		posted <- closedLoopN(ctx, n, conc, func(ctx context.Context, i int) error {
			s := &sample{posted: time.Now()}
			id, err := t.postAction(ctx, i, s.posted)
			s.id = id
			mu.Lock()
			samples[i] = s
			mu.Unlock()
			return err
		})
	}()
	// Watch the verdicts while the POSTs go, every 25 ms: the watcher must
	// not load the database it measures (latencies here are seconds).
	deadline := time.Now().Add(5 * time.Minute)
	var postErr error
	postsDone := false
	for {
		if !postsDone {
			select {
			case postErr = <-posted:
				postsDone = true
			default:
			}
		}
		if postErr != nil {
			return nil, postErr
		}
		mu.Lock()
		var ids []string
		for _, s := range samples {
			if s != nil && s.id != "" && s.last.IsZero() {
				ids = append(ids, s.id)
			}
		}
		mu.Unlock()
		if postsDone && len(ids) == 0 {
			return samples, nil
		}
		if len(ids) > 0 {
			stages, err := verdictStages(ctx, t.s.DB, t.id, ids)
			if err != nil {
				return nil, err
			}
			now := time.Now()
			mu.Lock()
			for _, s := range samples {
				if s != nil {
					s.seen(stages, now)
				}
			}
			mu.Unlock()
		}
		if time.Now().After(deadline) {
			return nil, errors.New("verdicts not final within 5 minutes")
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (t *tenant) verify(ctx context.Context, w io.Writer, n, conc int, ws *workers) error {
	// The window closed ten minutes ago: provisional and final at once.
	requestedAt := time.Now().UTC().Add(-11 * time.Minute)
	if err := t.setup(ctx, n, 10*time.Minute, requestedAt); err != nil {
		return err
	}
	cpu := startCPU(ws)
	start := time.Now()
	samples, err := t.closedLoop(ctx, n, conc, requestedAt)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	cpuLine := cpu.capture(wall)
	// The baseline, right after on the same server, worker and queue: a
	// no-op workflow, start → complete, the same clients.
	bstart := time.Now()
	noop, err := noopClosedLoop(ctx, t.s, n, conc)
	if err != nil {
		return err
	}
	bwall := time.Since(bstart)
	var first, final, answered, after []time.Duration
	for _, s := range samples {
		first = append(first, s.first.Sub(s.posted))
		final = append(final, s.last.Sub(s.posted))
		answered = append(answered, s.answered.Sub(s.posted))
		after = append(after, s.last.Sub(s.answered))
	}
	fmt.Fprintf(w, "bench verify: %d actions, %d client(s) each waiting for its verdict, %s, %s\n", n, conc, ws, loadAverage())
	printLatencyRatios(w, "POST → first verdict", first, noop)
	printLatencyRatios(w, "POST → final verdict", final, noop)
	fmt.Fprintf(w, "  POST → first verdict stored:  p50 %s  p99 %s  max %s\n", pct(first, 50), pct(first, 99), pct(first, 100))
	fmt.Fprintf(w, "  POST → final verdict stored:  p50 %s  p99 %s  max %s\n", pct(final, 50), pct(final, 99), pct(final, 100))
	fmt.Fprintf(w, "    of which POST → 202 (action stored, workflow started): p50 %s  p99 %s; 202 → final verdict: p50 %s  p99 %s\n",
		pct(answered, 50), pct(answered, 99), pct(after, 50), pct(after, 99))
	fmt.Fprintf(w, "  no-op workflow start → complete (baseline, same clients after): p50 %s  p99 %s  max %s\n", pct(noop, 50), pct(noop, 99), pct(noop, 100))
	fmt.Fprintf(w, "  throughput %.1f verifications/s over %s; no-op %.1f/s\n", float64(n)/wall.Seconds(), wall.Round(time.Millisecond), float64(n)/bwall.Seconds())
	fmt.Fprint(w, cpuLine)
	return nil
}

func (t *tenant) settle(ctx context.Context, w io.Writer, n, conc int, window time.Duration, ws *workers) error {
	// Facts of each payout a second into its window.
	if err := t.setup(ctx, n, window, time.Now().UTC()); err != nil {
		return err
	}
	cpu := startCPU(ws)
	start := time.Now()
	samples, err := t.openLoop(ctx, n, conc)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	cpuLine := cpu.capture(wall)
	// The baseline, right after on the same server, workers and queue: as
	// many workflows that only sleep for the same window, started as fast.
	bcpu := startCPU(ws)
	sleepers, bwall, err := sleepersAtOnce(ctx, t.s, n, conc, window)
	if err != nil {
		return err
	}
	bcpuLine := bcpu.capture(bwall)
	var total, lag []time.Duration
	var lastPost time.Time
	for _, s := range samples {
		total = append(total, s.last.Sub(s.posted))
		lag = append(lag, s.last.Sub(s.posted.Add(window)))
		if s.posted.After(lastPost) {
			lastPost = s.posted
		}
	}
	rate, brate := float64(n)/wall.Seconds(), float64(n)/bwall.Seconds()
	fmt.Fprintf(w, "bench settle: %d verifications at once, each with a %s window from its POST, %s, %s\n", n, window, ws, loadAverage())
	fmt.Fprintf(w, "  ratio final verdicts/s ÷ sleeping no-ops/s: %.2f\n", rate/brate)
	fmt.Fprintf(w, "  ratio POST → final verdict ÷ sleeping no-op start → complete:  p50 %s  p99 %s\n", ratio(pct(total, 50), pct(sleepers, 50)), ratio(pct(total, 99), pct(sleepers, 99)))
	fmt.Fprintf(w, "  all %d POSTed in %s\n", n, lastPost.Sub(start).Round(time.Millisecond))
	fmt.Fprintf(w, "  POST → final verdict:              p50 %s  p99 %s  max %s\n", pct(total, 50), pct(total, 99), pct(total, 100))
	fmt.Fprintf(w, "  window close → final verdict:      p50 %s  p99 %s  max %s\n", pct(lag, 50), pct(lag, 99), pct(lag, 100))
	fmt.Fprintf(w, "  throughput %.1f final verdicts/s (first POST to last final, %s)\n", rate, wall.Round(time.Millisecond))
	fmt.Fprint(w, cpuLine)
	fmt.Fprintf(w, "  baseline, right after: %d no-op workflows that only sleep %s, started %d at a time\n", n, window, conc)
	fmt.Fprintf(w, "    start → complete:                p50 %s  p99 %s  max %s\n", pct(sleepers, 50), pct(sleepers, 99), pct(sleepers, 100))
	fmt.Fprintf(w, "    throughput %.1f completed/s (first start to last complete, %s)\n", brate, bwall.Round(time.Millisecond))
	fmt.Fprint(w, "  "+bcpuLine)
	return nil
}

// pct is the p-th percentile of ds (100: the largest), to 0.1 ms.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	i := min(max((len(s)*p+99)/100, 1), len(s))
	return s[i-1].Round(100 * time.Microsecond)
}

// ratio renders a ÷ b to two decimals.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

func printLatencyRatios(w io.Writer, name string, got, base []time.Duration) {
	fmt.Fprintf(w, "  ratio %s ÷ no-op:  p50 %s  p99 %s\n", name, ratio(pct(got, 50), pct(base, 50)), ratio(pct(got, 99), pct(base, 99)))
}
