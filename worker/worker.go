// Package worker builds CommitLayer's Temporal worker: it registers the
// workflows and activities, and registers the search attributes the
// workflows upsert.
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
	// MaxConcurrentActivities and MaxConcurrentWorkflowTasks: zero keeps
	// the SDK defaults.
	MaxConcurrentActivities    int
	MaxConcurrentWorkflowTasks int
	// WorkflowTaskPollers and ActivityTaskPollers: zero means 4 each (the
	// SDK's 2 leave the worker idle while timers fire in bursts).
	WorkflowTaskPollers int
	ActivityTaskPollers int
}

// New builds a worker polling the task queue, with the product's workflows
// and the activities' methods registered. It is not started: cmd may
// register more on it first (the sandbox benchmark, when enabled).
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
	return w
}

// RegisterWorkflows registers the product's workflows (VerifyAction,
// PollConnectors) on a worker or a replayer, under stable names.
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.VerifyAction, workflow.RegisterOptions{Name: "VerifyAction"})
	r.RegisterWorkflowWithOptions(workflows.PollConnectors, workflow.RegisterOptions{Name: "PollConnectors"})
}

// EnsureSearchAttributes registers the product's search attributes, and
// more (the benchmark's, when it runs here), in the namespace unless they
// exist. It is idempotent and safe to run from every worker at start.
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
