// Package worker builds CommitLayer's Temporal worker, registering the
// workflows, activities and the search attributes the workflows upsert.
package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/workflows"
)

// Options configure the worker.
type Options struct {
	TaskQueue string // defaults to workflows.TaskQueue
	// Deployment is the Worker Deployment version the worker runs as; zero
	// runs unversioned (COMMITLAYER_WORKER_VERSIONING=0).
	Deployment Deployment
	// MaxConcurrentActivities: zero keeps the SDK default.
	// MaxConcurrentWorkflowTasks: zero means half the sticky cache (2 to
	// 1 000), so the tasks in flight never fill it.
	MaxConcurrentActivities    int
	MaxConcurrentWorkflowTasks int
	// WorkflowTaskPollers and ActivityTaskPollers: zero means 4 each (the
	// SDK's 2 leave the worker idle while timers fire in bursts).
	WorkflowTaskPollers int
	ActivityTaskPollers int
	// StickyCacheSize bounds the workflows kept in memory between tasks
	// (cache.go), once per process; zero: StickyCacheSizeFor the memory limit.
	StickyCacheSize int
}

// New builds a worker polling the task queue with the product's workflows and
// activities registered, not started (cmd may register more first).
func New(c client.Client, acts *activities.Activities, opts Options) sdkworker.Worker {
	tq := opts.TaskQueue
	if tq == "" {
		tq = workflows.TaskQueue
	}
	wfPollers, actPollers := opts.WorkflowTaskPollers, opts.ActivityTaskPollers
	if wfPollers <= 0 {
		wfPollers = 4
	}
	if actPollers <= 0 {
		actPollers = 4
	}
	w := NewBare(c, tq, opts)
	RegisterWorkflows(w)
	w.RegisterActivity(acts)
	return w
}

// NewBare builds a worker as New does but with nothing registered (the sandbox
// registers its own wiring).
func NewBare(c client.Client, taskQueue string, opts Options) sdkworker.Worker {
	wfPollers, actPollers := opts.WorkflowTaskPollers, opts.ActivityTaskPollers
	if wfPollers <= 0 {
		wfPollers = 4
	}
	if actPollers <= 0 {
		actPollers = 4
	}
	cache := opts.StickyCacheSize
	if cache <= 0 {
		cache = StickyCacheSizeFor(memoryLimit())
	}
	SetStickyCacheSize(cache)
	// A workflow whose task is in progress (local activities included) is
	// pinned in the cache; past its capacity the SDK fails the next task
	// ("cache capacity is fully occupied with pinned elements"). Half the cache
	// leaves room for the workflows about to take a step.
	wfTasks := opts.MaxConcurrentWorkflowTasks
	if wfTasks <= 0 {
		wfTasks = min(max(cache/2, 2), 1000)
	}
	return sdkworker.New(c, taskQueue, sdkworker.Options{
		MaxConcurrentActivityExecutionSize:     opts.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: wfTasks,
		MaxConcurrentWorkflowTaskPollers:       wfPollers,
		MaxConcurrentActivityTaskPollers:       actPollers,
		DeploymentOptions:                      opts.Deployment.options(),
	})
}

// The product's workflows and their versioning behaviour (see
// docs/operations.md, "Worker Versioning"):
//
//   - VerifyAction upgrades automatically. A verification sleeps through
//     its settlement window and watches for days; pinned, it would keep the
//     build it started on running (and unpatched) for as long. Its changes
//     go through workflow.GetVersion, and recorded histories replay in
//     tests (workflows/replay_test.go), so a new build can take over a
//     sleeping verification at its next workflow task.
//   - PollConnectors upgrades automatically: it loops for as long as a
//     tenant has open verifications and keeps no state a new build could
//     misread (it continues as new between rounds).
const (
	VerifyActionBehavior   = workflow.VersioningBehaviorAutoUpgrade
	PollConnectorsBehavior = workflow.VersioningBehaviorAutoUpgrade
)

// RegisterWorkflows registers the product's workflows (VerifyAction,
// PollConnectors) on a worker or a replayer, under stable names.
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	RegisterVerifyAction(r, VerifyActionBehavior)
	r.RegisterWorkflowWithOptions(workflows.PollConnectors, workflow.RegisterOptions{
		Name: "PollConnectors", VersioningBehavior: PollConnectorsBehavior})
}

// RegisterVerifyAction registers VerifyAction under its stable name with a
// versioning behaviour (the product's is VerifyActionBehavior; the sandbox pins).
func RegisterVerifyAction(r sdkworker.WorkflowRegistry, behavior workflow.VersioningBehavior) {
	r.RegisterWorkflowWithOptions(workflows.VerifyAction, workflow.RegisterOptions{
		Name: "VerifyAction", VersioningBehavior: behavior})
}

// EnsureSearchAttributes registers the product's search attributes, and more,
// unless they exist; safe to run from every worker at start.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, more ...temporal.SearchAttributeKey) error {
	existing, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, k := range append(slices.Clone(workflows.SearchAttributes), more...) {
		if _, ok := existing.GetCustomAttributes()[k.GetName()]; ok {
			continue
		}
		missing[k.GetName()] = k.GetValueType()
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}
