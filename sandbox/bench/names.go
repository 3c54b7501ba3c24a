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

// Register registers the benchmark's workflows on a worker or a replayer
// under their stable names. The harness's activities are registered with
// them by whoever builds the harness (cmd/commitlayer).
func Register(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(Benchmark, workflow.RegisterOptions{Name: "Benchmark"})
	r.RegisterWorkflowWithOptions(Scenario, workflow.RegisterOptions{Name: "Scenario"})
	r.RegisterWorkflowWithOptions(Replay, workflow.RegisterOptions{Name: "Replay"})
}
