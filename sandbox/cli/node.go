// Package cli is the sandbox's side of the commitlayer binary: the
// benchmark's part of a CommitLayer process (Node: its store, runner,
// admin routes and workers, lent the product's store, Temporal client and
// services) and the failure matrix's command (Matrix: `commitlayer
// sandbox` and `demo`). cmd/commitlayer parses the flags and the
// environment into their configuration and calls them; the product knows
// nothing of either.
package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/benchapi"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	sbcontracts "github.com/commitlayer/commitlayer/sandbox/contracts"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/service"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/worker"
)

// Product is what the process lends the benchmark: one store, one
// Temporal client, the product's services.
type Product struct {
	DB        *postgres.DB
	Temporal  client.Client
	Verifier  *verify.Client
	Actions   *service.Actions
	Contracts *service.Contracts
	Secrets   *secrets.Box
	Logger    *slog.Logger
}

// NodeConfig is the benchmark's configuration in a process.
type NodeConfig struct {
	// Runner starts runs here: the admin routes and the sandbox command
	// (the Benchmark role).
	Runner bool
	// Workers runs the benchmark's workers here (the BenchmarkWorker
	// role): its workflows and the harness's activities on TaskQueue, and
	// on this process's own queue the steps bound to its enterprises and
	// the scenarios' verifications (the product's VerifyAction with the
	// sandbox's wiring), as a version of Worker.Deployment.
	Workers   bool
	TaskQueue string
	Worker    worker.Options
	// Dir holds the enterprises' files; QueryConnectors names the systems
	// read by the http_json connector instead of their feed.
	Dir             string
	QueryConnectors []string
	// TemporalUI is the Temporal UI's root the reports link to.
	TemporalUI, Namespace string
}

// Node is the benchmark's part of a process.
type Node struct {
	Store  *benchstore.Store
	Runner *bench.Runner // nil without NodeConfig.Runner
	// Harness runs the scenarios' steps; Activities are the product's
	// activities with the sandbox's wiring (connector pulls through each
	// scenario's chaos), run by the scenarios' verifications. Both nil
	// without NodeConfig.Workers.
	Harness    *harness.Activities
	Activities *activities.Activities

	// BenchWorker polls the benchmark's queue; LocalWorker this process's
	// own (the steps bound to its enterprises). Close stops them.
	BenchWorker, LocalWorker sdkworker.Worker

	cfg     NodeConfig
	product Product
}

// OpenNode migrates the benchmark's schema (after the product's) and
// builds what the configuration asks for; the workers start with Start.
func OpenNode(ctx context.Context, p Product, cfg NodeConfig) (*Node, error) {
	n := &Node{Store: benchstore.New(p.DB), cfg: cfg, product: p}
	if err := n.Store.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate benchmark schema: %w", err)
	}
	if cfg.Runner {
		n.Runner = &bench.Runner{Temporal: p.Temporal, Store: n.Store, TaskQueue: cfg.TaskQueue}
	}
	if !cfg.Workers {
		return n, nil
	}
	localQueue := localTaskQueue(cfg.TaskQueue)
	host := &harness.Host{}
	n.Harness = &harness.Activities{
		Store: n.Store, Recorder: p.Actions, Rechecker: p.Verifier, Contracts: sbcontracts.FS,
		Dir: cfg.Dir, TaskQueue: localQueue, Logger: p.Logger, Host: host, QueryConnectors: cfg.QueryConnectors,
		// Model-driven agents: providers built in this process (keys from
		// its environment), turns and tool calls written ahead.
		Models: &harness.Models{}, AgentSteps: n.Store,
	}
	// The sandbox's systems listen on the loopback: its own wiring pulls
	// them without the production guard, each tenant through its
	// scenario's extractor chaos.
	n.Activities = &activities.Activities{
		Store:      p.DB,
		Logger:     p.Logger,
		HTTPClient: host.ExtractClient(),
		Contracts:  p.Contracts,
		Secrets:    p.Secrets,
	}
	n.BenchWorker = worker.NewBare(p.Temporal, cfg.TaskQueue, cfg.Worker)
	bench.Register(n.BenchWorker)
	harness.Register(n.BenchWorker, n.Harness)
	n.LocalWorker = worker.NewBare(p.Temporal, localQueue, cfg.Worker)
	bench.RegisterVerifications(n.LocalWorker, n.Activities, &bench.Reporter{
		Activities: n.Activities, Temporal: p.Temporal, Scenarios: host, Logger: p.Logger,
	})
	harness.Register(n.LocalWorker, n.Harness)
	return n, nil
}

// localTaskQueue names this process's own task queue.
func localTaskQueue(shared string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-local-%s-%d-%s", shared, host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Mounts are the benchmark's admin routes and their OpenAPI fragment, for
// the product's API (none without a runner).
func (n *Node) Mounts() ([]api.Mount, [][]byte) {
	if n == nil || n.Runner == nil {
		return nil, nil
	}
	routes := &benchapi.API{Runs: n.Store, Runner: n.Runner,
		Reports: bench.Reports{TemporalUI: n.cfg.TemporalUI, Namespace: n.cfg.Namespace}}
	return routes.Mounts(), [][]byte{benchapi.OpenAPI}
}

// Start starts the benchmark's workers (none without NodeConfig.Workers).
func (n *Node) Start(logger *slog.Logger) error {
	if n == nil || n.BenchWorker == nil {
		return nil
	}
	if err := n.BenchWorker.Start(); err != nil {
		return fmt.Errorf("start benchmark worker: %w", err)
	}
	if err := n.LocalWorker.Start(); err != nil {
		return fmt.Errorf("start local worker: %w", err)
	}
	logger.Info("benchmark workers started", "task_queue", n.cfg.TaskQueue, "local_queue", n.Harness.TaskQueue,
		"deployment", n.cfg.Worker.Deployment.String())
	return nil
}

// ServeAPI tells the harness the process's API, which the via paths of
// model-driven runs record through.
func (n *Node) ServeAPI(url string, actions harness.ActionLister) {
	if n != nil && n.Harness != nil {
		n.Harness.API, n.Harness.Actions = url, actions
	}
}

// Close stops the workers and removes the enterprises still open.
func (n *Node) Close() {
	if n == nil || n.BenchWorker == nil {
		return
	}
	n.LocalWorker.Stop()
	n.BenchWorker.Stop()
	n.Harness.Host.CloseAll()
	n.Harness.Models.Close()
}

// Actions is the service the process's API records and starts
// verifications with: a itself, or where scenarios live
// (NodeConfig.Workers) one that leaves an action recorded for a scenario's
// tenant to its scenario — by the MCP gateway or the trace ingest on a
// -via run — which starts its verification as its child beside the
// enterprise (connector pulls through the scenario's chaos, the final
// verdict reported to it), as on the direct path; the service marks it
// started. Every other action is started as the product starts it.
func (n *Node) Actions(a *service.Actions) *service.Actions {
	if n == nil || n.Harness == nil {
		return a
	}
	return service.NewActions(n.product.DB, n.product.Contracts, scenarioVerifier{Client: n.product.Verifier, host: n.Harness.Host}, nil, n.product.Logger)
}

type scenarioVerifier struct {
	*verify.Client
	host *harness.Host
}

func (v scenarioVerifier) Start(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error {
	if _, ok := v.host.ScenarioWorkflow(tenantID); ok {
		return nil
	}
	return v.Client.Start(ctx, tenantID, a)
}
