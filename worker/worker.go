// Package worker builds CommitLayer's Temporal worker: it registers the
// workflows and activities, and registers the search attributes the
// workflows upsert.
package worker

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/workflows"
)

// Options configure the worker.
type Options struct {
	TaskQueue string // defaults to workflows.TaskQueue
	// MaxConcurrentActivities and MaxConcurrentWorkflowTasks: zero keeps
	// the SDK defaults.
	MaxConcurrentActivities    int
	MaxConcurrentWorkflowTasks int
	// WorkflowTaskPollers and ActivityTaskPollers: zero means 4 each (the
	// SDK's 2 leave the worker idle while timers fire in bursts).
	WorkflowTaskPollers int
	ActivityTaskPollers int
	// MoreActivities are more activity structs to register (the sandbox
	// harness's).
	MoreActivities []any
}

// New builds a worker polling the task queue, with every CommitLayer
// workflow and the activities' methods registered.
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
	w := sdkworker.New(c, tq, sdkworker.Options{
		MaxConcurrentActivityExecutionSize:     opts.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: opts.MaxConcurrentWorkflowTasks,
		MaxConcurrentWorkflowTaskPollers:       wfPollers,
		MaxConcurrentActivityTaskPollers:       actPollers,
	})
	RegisterWorkflows(w)
	w.RegisterActivity(acts)
	for _, a := range opts.MoreActivities {
		w.RegisterActivity(a)
	}
	return w
}

// RegisterWorkflows registers CommitLayer's workflows on a worker or a
// replayer, under stable names.
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.VerifyAction, workflow.RegisterOptions{Name: "VerifyAction"})
	r.RegisterWorkflowWithOptions(workflows.PollConnectors, workflow.RegisterOptions{Name: "PollConnectors"})
	r.RegisterWorkflowWithOptions(workflows.Benchmark, workflow.RegisterOptions{Name: "Benchmark"})
	r.RegisterWorkflowWithOptions(workflows.Scenario, workflow.RegisterOptions{Name: "Scenario"})
}

// EnsureSearchAttributes registers CommitLayer's search attributes in the
// namespace unless they exist. It is idempotent and safe to run from every
// worker at start.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	existing, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, k := range workflows.SearchAttributes {
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
