// Package harness puts the sandbox to work: one scenario of the catalogue
// (sandbox/catalogue) on a fresh enterprise, an agent under chaos,
// CommitLayer's verdict, the oracle's truth, and the steps that run it as
// Temporal activities. The scenarios themselves are sandbox/catalogue's, the
// rows, summaries and their rendering sandbox/report's, the model-driven
// agent's spec (provider, bounds, via path) sandbox/agent's. Its files
// follow two seams:
//
//   - The live enterprise: one scenario while it runs (live.go: Live,
//     Start; host.go: the live enterprises of the scenarios running in this
//     process, their payments backends and connector transports; query.go:
//     the http_json connectors).
//   - The activities: the steps a Scenario workflow runs (activities.go:
//     Prepare, RunPrior, RunAgent, Score, AfterSettlement, RecordRun,
//     Cleanup, and Register; llmagent_activities.go, fakeplan.go,
//     models.go, via.go, via_run.go: the model-driven agent's; replay.go:
//     ReplayAgent; modeljudge.go: ModelJudge; judges.go: the rule judge on
//     a row; sinks.go: DeliverSinks).
//
// These two stay one package: the activities keep their per-scenario state
// on the live enterprise (the unexported live of host.go holds the Live, the
// model-driven agent's conversation, the replay's and the via path's
// state), and Live's replay and via methods (Live.Replay, viaConn) close
// over the activities' types (the recorded row, the MCP gateway's
// connection). Cutting them apart is no import cycle, but it would export
// that state for no caller outside; what has a caller outside (the
// catalogue, the results) is cut out.
package harness
