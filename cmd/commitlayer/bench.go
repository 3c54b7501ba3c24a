package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/internal/proccpu"
	"github.com/commitlayer/commitlayer/worker"
)

// benchCmd measures CommitLayer end to end on the local services:
//
//	commitlayer bench verify [-actions 200] [-concurrency 1]
//	    POST /v1/actions → first verdict stored and → final verdict stored,
//	    for actions whose settlement window has already closed.
//	commitlayer bench settle [-actions 500] [-window 5s]
//	    that many verifications at once, each waiting on a settlement timer:
//	    POST → final verdict, throughput, and the CPU each process used.
//
// Each also runs its baseline right after, on the same server, worker(s)
// and task queue: verify a no-op workflow (start → complete) with the same
// clients, settle as many workflows that only sleep for the same window;
// the ratios come first in what it prints. -workers N runs N-1 more worker
// processes (`commitlayer bench worker`) on the same queue.
//
// It starts the API and one worker in this process on a task queue of its
// own, and a fresh tenant.
func benchCmd(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "worker" {
		return benchWorker(ctx, logger) // one of the -workers processes
	}
	if len(args) > 0 && args[0] == "scale" {
		return benchScaleCmd(ctx, logger, args[1:], stdout, stderr)
	}
	if len(args) == 0 || (args[0] != "verify" && args[0] != "settle") {
		fmt.Fprint(stderr, "usage: commitlayer bench verify|settle|scale [flags]\n")
		return 2
	}
	mode := args[0]
	fs := flag.NewFlagSet("commitlayer bench "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	actions := fs.Int("actions", map[string]int{"verify": 200, "settle": 500}[mode], "actions to verify")
	conc := fs.Int("concurrency", map[string]int{"verify": 1, "settle": 32}[mode], "POSTs in flight")
	window := fs.Duration("window", 5*time.Second, "settlement window (settle)")
	workers := fs.Int("workers", 1, "worker processes on the bench's task queue (this one and workers-1 children)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *actions < 1 || *conc < 1 || *window <= 0 || *workers < 1 || *workers > 16 {
		fmt.Fprint(stderr, "actions and concurrency must be at least 1, window positive, workers 1 to 16\n")
		return 2
	}
	b, err := newBench(ctx, logger)
	if err != nil {
		logger.Error("bench", "error", err)
		return 1
	}
	defer b.m.Close()
	defer b.stopWorkers()
	if err := b.startWorkers(ctx, *workers); err != nil {
		logger.Error("bench", "error", err)
		return 1
	}
	switch mode {
	case "verify":
		err = b.verify(ctx, stdout, *actions, *conc)
	default:
		err = b.settle(ctx, stdout, *actions, *conc, *window)
	}
	if err != nil {
		logger.Error("bench "+mode, "error", err)
		return 1
	}
	return 0
}

type benchmarker struct {
	m      *Main
	tenant string         // the bench tenant's id
	api    *client.Client // the tenant's: the same calls a user makes

	workers  int
	children []*exec.Cmd // the other worker processes

	probeBase int // postAction's first account (bench scale probes a tenant twice)
}

func newBench(ctx context.Context, logger *slog.Logger) (*benchmarker, error) {
	var r [8]byte
	_, _ = rand.Read(r[:])
	os.Setenv("COMMITLAYER_ADDR", "127.0.0.1:0")
	os.Setenv("COMMITLAYER_TASK_QUEUE", "commitlayer-bench-"+hex.EncodeToString(r[:4]))
	// A deployment of its own, made current for its queue alone: the bench
	// never changes the routing of a fleet on the same namespace.
	os.Setenv("COMMITLAYER_DEPLOYMENT", "commitlayer-bench-"+hex.EncodeToString(r[:4]))
	os.Setenv("COMMITLAYER_MAKE_CURRENT", string(worker.CurrentAlways))
	if os.Getenv("COMMITLAYER_ADMIN_KEY") == "" {
		os.Setenv("COMMITLAYER_ADMIN_KEY", "bench-"+hex.EncodeToString(r[:]))
	}
	roles := Roles{API: true, Worker: true}
	cfg, err := ConfigFromEnv(roles)
	if err != nil {
		return nil, err
	}
	m := &Main{Config: cfg, Logger: quiet(logger), RegisterMore: registerBaselines}
	m.WorkerOptions.MaxConcurrentActivities = 200
	if err := m.Open(ctx, roles); err != nil {
		m.Close()
		return nil, err
	}
	// One pool for the bench's concurrent clients; no retries, so a
	// failure shows instead of being absorbed into the latencies.
	hc := client.WithHTTPClient(&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	once := client.WithRetry(client.RetryPolicy{MaxAttempts: 1})
	admin, err := client.New(m.URL(), cfg.AdminKey, hc, once)
	if err != nil {
		m.Close()
		return nil, err
	}
	t, err := admin.CreateTenant(ctx, "bench")
	if err != nil {
		m.Close()
		return nil, err
	}
	b := &benchmarker{m: m, tenant: t.ID}
	cpuDatabase.Store(m.DB.Pool().Config().ConnConfig.Database)
	if b.api, err = client.New(m.URL(), t.APIKey, hc, once); err != nil {
		m.Close()
		return nil, err
	}
	return b, nil
}

// benchContract is the bench's payout contract: id, settlement and watch
// window filled in by payoutBenchContract.
const benchContract = `id: %s
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
`

// payoutBenchContract is benchContract as bench_payout (no watch) or, with
// a watch, bench_watch (its verifications stay open for the window).
func payoutBenchContract(id, settlement, watch string) []byte {
	return []byte(fmt.Sprintf(benchContract, id, settlement, watch))
}

// setup posts the contract and, per account, its opening and its payout.
func (b *benchmarker) setup(ctx context.Context, n int, settlement time.Duration, requestedAt time.Time) error {
	if _, _, err := b.api.PutContract(ctx, payoutBenchContract("bench_payout", settlement.String(), "0s")); err != nil {
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
			if _, err := b.api.PostFacts(ctx, facts); err != nil {
				return err
			}
			facts = facts[:0]
		}
	}
	return nil
}

// postAction records the bench payout on account acc_i.
func (b *benchmarker) postAction(ctx context.Context, i int, requestedAt time.Time) (string, error) {
	acc, err := b.api.RecordAction(ctx, commitlayer.Action{
		Contract: "bench_payout", Agent: "bench", Subject: commitlayer.Subject(fmt.Sprintf("account:acc_%d", b.probeBase+i)),
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

// closedLoop runs conc clients, each posting an action and waiting for its
// final verdict before posting the next: latency without a queue in front.
func (b *benchmarker) closedLoop(ctx context.Context, n, conc int, requestedAt time.Time) ([]*sample, error) {
	samples := make([]*sample, n)
	err := closedLoopN(ctx, n, conc, func(ctx context.Context, i int) error {
		s := &sample{posted: time.Now()}
		id, err := b.postAction(ctx, i, requestedAt)
		if err != nil {
			return err
		}
		s.id, s.answered = id, time.Now()
		deadline := time.Now().Add(time.Minute)
		for s.last.IsZero() {
			stages, err := b.m.DB.VerdictStages(ctx, b.tenant, []string{s.id})
			if err != nil {
				return err
			}
			if final, ok := stages[s.id]; ok {
				if s.first.IsZero() {
					s.first = time.Now()
				}
				if final {
					s.last = time.Now()
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("action %s: no final verdict within a minute", s.id)
			}
			time.Sleep(time.Millisecond)
		}
		samples[i] = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return samples, nil
}

// run posts n actions (conc at a time), each requested at the moment it is
// posted, and watches the store until each has a final verdict.
func (b *benchmarker) run(ctx context.Context, n, conc int) ([]*sample, error) {
	samples := make([]*sample, n)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, conc)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s := &sample{posted: time.Now()}
			id, err := b.postAction(ctx, i, s.posted)
			s.id = id
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			samples[i] = s
		}()
	}
	// Watch the verdicts while the POSTs go.
	done := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(5 * time.Minute)
		for {
			mu.Lock()
			var ids []string
			for _, s := range samples {
				if s != nil && s.id != "" && s.last.IsZero() {
					ids = append(ids, s.id)
				}
			}
			posted := 0
			for _, s := range samples {
				if s != nil {
					posted++
				}
			}
			mu.Unlock()
			if posted == n && len(ids) == 0 {
				done <- nil
				return
			}
			if len(ids) > 0 {
				stages, err := b.m.DB.VerdictStages(ctx, b.tenant, ids)
				if err != nil {
					done <- err
					return
				}
				now := time.Now()
				mu.Lock()
				for _, s := range samples {
					if s == nil {
						continue
					}
					if final, ok := stages[s.id]; ok {
						if s.first.IsZero() {
							s.first = now
						}
						if final {
							s.last = now
						}
					}
				}
				mu.Unlock()
			}
			if time.Now().After(deadline) {
				done <- fmt.Errorf("verdicts not final within 5 minutes")
				return
			}
			// Every 25 ms: the watcher must not load the database it
			// measures (latencies here are seconds).
			time.Sleep(25 * time.Millisecond)
		}
	}()
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	if err := <-done; err != nil {
		return nil, err
	}
	return samples, nil
}

func (b *benchmarker) verify(ctx context.Context, w io.Writer, n, conc int) error {
	// The window closed ten minutes ago: provisional and final at once.
	requestedAt := time.Now().UTC().Add(-11 * time.Minute)
	if err := b.setup(ctx, n, 10*time.Minute, requestedAt); err != nil {
		return err
	}
	cpu := startCPU()
	start := time.Now()
	samples, err := b.closedLoop(ctx, n, conc, requestedAt)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	cpuLine := cpu.capture(wall)
	// The baseline, right after on the same server, worker and queue: a
	// no-op workflow, start → complete, the same clients.
	bstart := time.Now()
	noop, err := b.noopClosedLoop(ctx, n, conc)
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
	fmt.Fprintf(w, "bench verify: %d actions, %d client(s) each waiting for its verdict, %s, %s\n", n, conc, b.workersDesc(), benchEnv())
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

func (b *benchmarker) settle(ctx context.Context, w io.Writer, n, conc int, window time.Duration) error {
	// Facts of each payout a second into its window.
	if err := b.setup(ctx, n, window, time.Now().UTC()); err != nil {
		return err
	}
	cpu := startCPU()
	start := time.Now()
	samples, err := b.run(ctx, n, conc)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	cpuLine := cpu.capture(wall)
	// The baseline, right after on the same server, workers and queue: as
	// many workflows that only sleep for the same window, started as fast.
	bcpu := startCPU()
	sleepers, bwall, err := b.sleepersAtOnce(ctx, n, conc, window)
	if err != nil {
		return err
	}
	bcpuLine := bcpu.capture(bwall)
	var total, lag, base []time.Duration
	var lastPost time.Time
	for _, s := range samples {
		total = append(total, s.last.Sub(s.posted))
		lag = append(lag, s.last.Sub(s.posted.Add(window)))
		if s.posted.After(lastPost) {
			lastPost = s.posted
		}
	}
	for _, s := range sleepers {
		base = append(base, s.latency())
	}
	rate, brate := float64(n)/wall.Seconds(), float64(n)/bwall.Seconds()
	fmt.Fprintf(w, "bench settle: %d verifications at once, each with a %s window from its POST, %s, %s\n", n, window, b.workersDesc(), benchEnv())
	fmt.Fprintf(w, "  ratio final verdicts/s ÷ sleeping no-ops/s: %.2f\n", rate/brate)
	fmt.Fprintf(w, "  ratio POST → final verdict ÷ sleeping no-op start → complete:  p50 %s  p99 %s\n", ratio(pct(total, 50), pct(base, 50)), ratio(pct(total, 99), pct(base, 99)))
	fmt.Fprintf(w, "  all %d POSTed in %s\n", n, lastPost.Sub(start).Round(time.Millisecond))
	fmt.Fprintf(w, "  POST → final verdict:              p50 %s  p99 %s  max %s\n", pct(total, 50), pct(total, 99), pct(total, 100))
	fmt.Fprintf(w, "  window close → final verdict:      p50 %s  p99 %s  max %s\n", pct(lag, 50), pct(lag, 99), pct(lag, 100))
	fmt.Fprintf(w, "  throughput %.1f final verdicts/s (first POST to last final, %s)\n", rate, wall.Round(time.Millisecond))
	fmt.Fprint(w, cpuLine)
	fmt.Fprintf(w, "  baseline, right after: %d no-op workflows that only sleep %s, started %d at a time\n", n, window, conc)
	fmt.Fprintf(w, "    start → complete:                p50 %s  p99 %s  max %s\n", pct(base, 50), pct(base, 99), pct(base, 100))
	fmt.Fprintf(w, "    throughput %.1f completed/s (first start to last complete, %s)\n", brate, bwall.Round(time.Millisecond))
	fmt.Fprint(w, "  "+bcpuLine)
	return nil
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	if i > len(s) {
		i = len(s)
	}
	return s[i-1].Round(100 * time.Microsecond)
}

func benchEnv() string {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	if len(f) > 0 {
		return "load average " + f[0]
	}
	return ""
}

// cpuMeter reads the CPU time of this process, the Temporal dev server and
// PostgreSQL from /proc.
type cpuMeter struct{ before cpuSnapshot }

func startCPU() *cpuMeter { return &cpuMeter{before: cpuByRole()} }

// capture renders the CPU used since the meter started, as report does.
func (c *cpuMeter) capture(wall time.Duration) string {
	var sb strings.Builder
	c.report(&sb, wall)
	return sb.String()
}

func (c *cpuMeter) report(w io.Writer, wall time.Duration) {
	used := cpuByRole().since(c.before)
	fmt.Fprintf(w, "  CPU over %s (2 cores = 200%%):", wall.Round(time.Millisecond))
	total := 0.0
	for _, role := range []string{"commitlayer", "temporal", "postgres"} {
		d := used[role]
		total += d
		fmt.Fprintf(w, " %s %.1fs (%.0f%%)", role, d, 100*d/wall.Seconds())
	}
	if total > 0 {
		fmt.Fprintf(w, "; Temporal's share of the three: %.0f%%", 100*used["temporal"]/total)
	}
	fmt.Fprintln(w)
}

// cpuSnapshot is the CPU time (seconds) of each process of a role
// ("commitlayer", "temporal", "postgres"), by pid.
type cpuSnapshot map[string]map[int]float64

// since is the CPU each role used between before and s, process by
// process: a process that started meanwhile counts whole, one that exited
// meanwhile (a Postgres backend whose connection closed) counts nothing —
// never a negative figure from a total that lost a process.
func (s cpuSnapshot) since(before cpuSnapshot) map[string]float64 {
	out := map[string]float64{}
	for role, pids := range s {
		for pid, t := range pids {
			if d := t - before[role][pid]; d > 0 {
				out[role] += d
			}
		}
	}
	return out
}

// cpuDatabase is the database the bench uses; PostgreSQL's backends
// serving other databases of the same server are not counted.
var cpuDatabase atomic.Value // string

// otherDatabasesBackend reports whether a PostgreSQL process's command
// line ("postgres: 15/main: <user> <database> <host>(<port>) <state>") is
// a client backend of a database other than db. Background processes (the
// checkpointer, the WAL writer, an autovacuum worker) and unrecognised
// lines count as the bench's.
func otherDatabasesBackend(cmdline, db string) bool {
	if db == "" {
		return false
	}
	parts := strings.SplitN(cmdline, ": ", 3)
	if len(parts) < 3 {
		return false
	}
	f := strings.Fields(parts[2])
	if len(f) < 3 || !(strings.HasSuffix(f[2], ")") && strings.Contains(f[2], "(") || f[2] == "[local]") {
		return false
	}
	return f[1] != db
}

// cpuByRole reads the CPU time of this process (and the bench's
// children), the Temporal server and PostgreSQL, process by process.
func cpuByRole() cpuSnapshot {
	self := os.Getpid()
	temporal := proccpu.Find(func(c string) bool {
		return strings.Contains(c, "temporal") && strings.Contains(c, "start-dev") || // the dev server
			strings.Contains(c, "temporal-server-") && strings.Contains(c, "/server") // Temporal's own server (make up TEMPORAL=server)
	})
	db, _ := cpuDatabase.Load().(string)
	pg := proccpu.Find(func(c string) bool {
		return (strings.HasPrefix(c, "postgres") || strings.Contains(c, "/postgres ")) && !otherDatabasesBackend(c, db)
	})
	out := cpuSnapshot{}
	for role, pids := range map[string][]int{"commitlayer": append([]int{self}, benchChildren()...), "temporal": temporal, "postgres": pg} {
		out[role] = map[int]float64{}
		for _, pid := range pids {
			if d, err := proccpu.Of(pid); err == nil { // a backend may exit meanwhile
				out[role][pid] = d.Seconds()
			}
		}
	}
	return out
}
