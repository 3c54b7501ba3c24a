package bench

import (
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Search attributes of benchmark runs, their scenarios and the scenarios'
// verifications:
//
//	temporal workflow list --query 'CommitLayerRun="…" AND CommitLayerAgree="disagree"'
var (
	SARun      = temporal.NewSearchAttributeKeyKeyword("CommitLayerRun")
	SAScenario = temporal.NewSearchAttributeKeyKeyword("CommitLayerScenario")
	SAAgree    = temporal.NewSearchAttributeKeyKeyword("CommitLayerAgree")
)

// SearchAttributes lists the benchmark's search attributes, registered
// (with the product's) by a worker that runs benchmarks.
var SearchAttributes = []temporal.SearchAttributeKey{SARun, SAScenario, SAAgree}

// BenchmarkWorkflowID is the workflow ID of a benchmark run.
func BenchmarkWorkflowID(runID string) string {
	return "benchmark/" + runID
}

// ScenarioWorkflowID is the workflow ID of one scenario of a benchmark run.
func ScenarioWorkflowID(runID, scenarioID string) string {
	return "benchmark/" + runID + "/" + scenarioID
}

// TaskQueue is the benchmark's task queue when the product's is the
// default one: only processes with the benchmark role poll it.
const TaskQueue = "commitlayer-benchmark"

// SignalVerdictPublished carries a commitlayer.Verdict to a Scenario each
// time one of its verifications reaches a final verdict (Reporter).
const SignalVerdictPublished = "verdict-published"

// Behavior is the versioning behaviour of the benchmark's workflows and of
// the verifications its scenarios start: pinned. A run finishes on the
// build it started on, so its rows are that build's (the results name one
// commit), and a scenario's verifications run beside its enterprise, on
// the process (and so the build) that holds it.
const Behavior = workflow.VersioningBehaviorPinned

// Register registers the benchmark's workflows on a worker or a replayer
// under their stable names. The harness's activities are registered with
// them by whoever builds the harness (cmd/commitlayer).
func Register(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(Benchmark, workflow.RegisterOptions{Name: "Benchmark", VersioningBehavior: Behavior})
	r.RegisterWorkflowWithOptions(Scenario, workflow.RegisterOptions{Name: "Scenario", VersioningBehavior: Behavior})
	r.RegisterWorkflowWithOptions(Replay, workflow.RegisterOptions{Name: "Replay", VersioningBehavior: Behavior})
}
