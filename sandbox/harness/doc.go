// Package harness puts the sandbox to work: the failure matrix's scenarios
// (a fresh enterprise, an agent under chaos, CommitLayer's verdict, the
// oracle's truth), the steps that run one as Temporal activities, and the
// results. Its files follow four seams:
//
//   - The catalogue: what a scenario is and which ones the matrix holds
//     (catalogue.go: Scenario; scenarios.go, cases.go, injections.go:
//     the processes' tasks and the injections, Lookup, Families).
//   - The live enterprise: one scenario while it runs (live.go: Live and
//     Env; host.go: the live enterprises of the scenarios running in this
//     process, their payments backends and connector transports; query.go:
//     the http_json connectors).
//   - The activities: the steps a Scenario workflow runs (activities.go:
//     Prepare, RunPrior, RunAgent, Score, AfterSettlement, RecordRun,
//     Cleanup, and Register; llmagent*.go, fakeplan.go, models.go, via.go:
//     the model-driven agent's; replay.go: ReplayAgent; modeljudge.go:
//     ModelJudge; sinks.go: DeliverSinks).
//   - The results: building and summarizing sandbox/matrix's rows and
//     writing them (results.go: BuildRow, NewResults; summary.go,
//     latency.go, passk.go, judges.go; markdown.go, llmresults.go,
//     files.go).
package harness
