package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/oracle"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// clientTimeout bounds every HTTP call the agent and the connectors make to
// the enterprise.
const clientTimeout = 10 * time.Second

// Live is one scenario's sandbox side while it runs: its enterprise, the
// agent's and the connectors' chaos transports, and what the agent did. The
// steps are called in order — Start, RunPrior, RunAgent, (verification by
// CommitLayer through ExtractClient), AfterSettlement, Truth, Close — and
// each is safe to call again (a retried activity): a step that already ran
// returns what it returned the first time instead of acting twice. Methods
// may be called from several goroutines; they run one at a time.
type Live struct {
	// Scenario is the scenario, with its tasks' agent ids filled in.
	Scenario catalogue.Scenario
	Env      *catalogue.Env
	// AgentChaos sits between the agent and the systems; ExtractChaos
	// between CommitLayer's connectors and the systems.
	AgentChaos, ExtractChaos *chaos.Transport
	// Down are the systems the connectors are made unable to reach at
	// verification (read from the scenario's rules), sorted.
	Down []string

	// conns is the scenario's connection pool under both chaos transports:
	// a pull asks every system at once, and http.DefaultTransport keeps
	// two idle connections per host, so every pull after the first would
	// dial most of its systems afresh (and leave the sockets in TIME_WAIT).
	conns *http.Transport

	mu        sync.Mutex
	prior     []agent.Result
	priorDone bool
	agentDone bool
	afterDone bool
	closed    bool
	// llm is the model-driven agent, when the run has one
	// (llmagent_activities.go).
	llm      *llmState
	replayed *replayed // set by Replay
}

// StartOptions adjust StartWith.
type StartOptions struct {
	// Payments builds the enterprise's payments backend (a
	// stripepay.Selection's Payments); nil means the sandbox's own.
	Payments func(sys *systems.System) systems.PaymentsBackend
}

// StartWith is Start with options: the enterprise's payments backend.
func StartWith(ctx context.Context, dir string, sc catalogue.Scenario, opts StartOptions) (*Live, error) {
	sc = normalize(sc)
	if err := sc.Task.Validate(); err != nil {
		return nil, fmt.Errorf("start scenario %s: task: %w", sc.ID, err)
	}
	for i, t := range sc.Prior {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("start scenario %s: prior task %d: %w", sc.ID, i+1, err)
		}
	}
	seed := sandbox.DefaultSeed()
	if sc.Seed != nil {
		sc.Seed(&seed)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start scenario %s: %w", sc.ID, err)
	}
	e, err := sandbox.New(ctx, dir, sandbox.Options{Seed: &seed, Payments: opts.Payments})
	if err != nil {
		return nil, fmt.Errorf("start scenario %s: %w", sc.ID, err)
	}
	conns := scenarioTransport()
	l := &Live{
		Scenario:     sc,
		Env:          &catalogue.Env{Enterprise: e},
		AgentChaos:   chaos.New(conns, e.URL()),
		ExtractChaos: chaos.New(conns, e.URL()),
		conns:        conns,
	}
	if sc.ExtractChaos != nil {
		for _, r := range sc.ExtractChaos(l.Env) {
			if err := l.ExtractChaos.Arm(ctx, r); err != nil {
				_ = e.Close()
				return nil, fmt.Errorf("start scenario %s: connectors' chaos: %w", sc.ID, err)
			}
			l.Down = appendDown(l.Down, r)
		}
	}
	slices.Sort(l.Down)
	return l, nil
}

// scenarioTransport is a scenario's connection pool: http.DefaultTransport's
// settings with room for every system's connection at once, twice over (a
// pull of each system, and a shared pull beside a pass's own).
func scenarioTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 2 * len(sandbox.Systems)
	return t
}

// appendDown adds the systems a rule makes unreachable on every call.
func appendDown(down []string, r chaos.Rule) []string {
	if r.Mode != chaos.Unreachable || r.Call != 0 {
		return down
	}
	names := []string{r.System}
	if r.System == "" {
		names = sandbox.Systems
	}
	for _, s := range names {
		if !slices.Contains(down, s) {
			down = append(down, s)
		}
	}
	return down
}

// normalize fills in the default agent id of the scenario's tasks.
func normalize(sc catalogue.Scenario) catalogue.Scenario {
	if sc.Task.AgentID == "" {
		sc.Task.AgentID = catalogue.DefaultAgent
	}
	prior := make([]agent.Task, len(sc.Prior))
	for i, t := range sc.Prior {
		if t.AgentID == "" {
			t.AgentID = sc.Task.AgentID
		}
		prior[i] = t
	}
	sc.Prior = prior
	return sc
}

// ExtractClient is the HTTP client CommitLayer's connectors must use for
// this scenario's enterprise: through the connectors' chaos transport.
func (l *Live) ExtractClient() *http.Client {
	return &http.Client{Transport: l.ExtractChaos, Timeout: clientTimeout}
}

// RunPrior runs the scenario's earlier tasks, in order and without chaos,
// with the scripted agent's default profile. Calling it again returns the
// same results.
func (l *Live) RunPrior(ctx context.Context) ([]agent.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.runPrior(ctx); err != nil {
		return nil, err
	}
	return slices.Clone(l.prior), nil
}

func (l *Live) runPrior(ctx context.Context) error {
	if l.closed {
		return errors.New("prior runs: the scenario is closed")
	}
	if l.priorDone {
		return nil
	}
	e := l.Env.Enterprise
	for i, t := range l.Scenario.Prior[len(l.prior):] {
		a := agent.NewScripted(e.URL(), &http.Client{Timeout: clientTimeout}, e.Clock(), agent.Profile{})
		res, err := a.Run(ctx, t)
		if err != nil {
			return fmt.Errorf("prior run %d: %w", len(l.prior)+i+1, err)
		}
		l.prior = append(l.prior, res)
	}
	l.priorDone = true
	return nil
}

// armAgentChaos arms the scenario's chaos on the agent's transport; when
// a rule cannot be armed it takes off those that were, so a retry arms
// each once.
func (l *Live) armAgentChaos(ctx context.Context) error {
	if l.Scenario.AgentChaos == nil {
		return nil
	}
	for _, r := range l.Scenario.AgentChaos(l.Env) {
		if err := l.AgentChaos.Arm(ctx, r); err != nil {
			l.AgentChaos.Disarm()
			return fmt.Errorf("agent's chaos: %w", err)
		}
	}
	return nil
}

// RunAgent arms the agent's chaos and runs the scenario's task (after the
// prior tasks, which it runs first if RunPrior was not called). Calling it
// again returns the same result.
func (l *Live) RunAgent(ctx context.Context) (agent.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.agentDone {
		return l.Env.Result, nil
	}
	if err := l.runPrior(ctx); err != nil {
		return agent.Result{}, err
	}
	if err := l.armAgentChaos(ctx); err != nil {
		return agent.Result{}, err
	}
	e := l.Env.Enterprise
	a := agent.NewScripted(e.URL(), &http.Client{Transport: l.AgentChaos, Timeout: clientTimeout}, e.Clock(), l.Scenario.Profile)
	res, err := a.Run(ctx, l.Scenario.Task)
	if err != nil {
		// The rules stay armed but nothing ran through them; a retry arms
		// them again, so take them off.
		l.AgentChaos.Disarm()
		return agent.Result{}, fmt.Errorf("agent: %w", err)
	}
	l.Env.Result = res
	l.agentDone = true
	return res, nil
}

// AfterSettlement runs the scenario's after-settlement injection, once. It
// reports whether the scenario has one.
func (l *Live) AfterSettlement(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Scenario.AfterSettlement == nil {
		return false, nil
	}
	switch {
	case l.afterDone:
		return true, nil
	case l.closed:
		return true, errors.New("after settlement: the scenario is closed")
	case !l.agentDone:
		return true, errors.New("after settlement: the agent has not run")
	}
	if err := l.Scenario.AfterSettlement(ctx, l.Env); err != nil {
		return true, fmt.Errorf("after settlement: %w", err)
	}
	l.afterDone = true
	return true, nil
}

// Truth asks the oracle, reading the enterprise's files, for the truth
// about the main task (with the prior tasks and the systems in Down), and
// for the stray subjects: effects of the process's kinds since the first
// task started on subjects no task was about.
func (l *Live) Truth(ctx context.Context) (matrix.Truth, []commitlayer.Subject, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return matrix.Truth{}, nil, errors.New("truth: the scenario is closed")
	case !l.agentDone:
		return matrix.Truth{}, nil, errors.New("truth: the agent has not run")
	}
	o, err := oracle.Open(l.Env.Enterprise.DBPath)
	if err != nil {
		return matrix.Truth{}, nil, fmt.Errorf("truth: %w", err)
	}
	defer o.Close()
	main := l.Env.Result.Action
	since := main.RequestedAt
	recorded := []commitlayer.Subject{main.Subject}
	if via, ok := l.viaRecorded(); ok {
		recorded = via // what the gateway or the ingest recorded
	}
	prior := make([]oracle.Action, 0, len(l.prior))
	for i, p := range l.prior {
		prior = append(prior, oracle.Action{Task: l.Scenario.Prior[i], RequestedAt: p.Action.RequestedAt})
		recorded = append(recorded, p.Action.Subject)
		if p.Action.RequestedAt.Before(since) {
			since = p.Action.RequestedAt
		}
	}
	truth, err := o.Truth(ctx, oracle.Input{
		Action: oracle.Action{Task: l.Scenario.Task, RequestedAt: main.RequestedAt},
		Down:   slices.Clone(l.Down),
		Prior:  prior,
	})
	if err != nil {
		return matrix.Truth{}, nil, fmt.Errorf("truth: %w", err)
	}
	stray, err := o.Stray(ctx, l.Scenario.Process, recorded, since)
	if err != nil {
		return matrix.Truth{}, nil, fmt.Errorf("truth: %w", err)
	}
	return truth, stray, nil
}

// ChaosLog lists what the chaos transports did, in order: the agent's
// calls a rule fired on, then the connectors'.
func (l *Live) ChaosLog() []string {
	var out []string
	for _, side := range []struct {
		name string
		t    *chaos.Transport
	}{{"agent", l.AgentChaos}, {"extract", l.ExtractChaos}} {
		for _, e := range side.t.Log() {
			if e.Rule != "" {
				out = append(out, side.name+" "+e.String())
			}
		}
	}
	return out
}

// Close stops the enterprise and closes its files; the files stay in the
// directory. It is safe to call twice.
func (l *Live) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	defer l.conns.CloseIdleConnections()
	if err := l.Env.Enterprise.Close(); err != nil {
		return fmt.Errorf("close scenario %s: %w", l.Scenario.ID, err)
	}
	return nil
}
