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
// These two stay one package, and this is why (it is no import cycle):
// the agent step is one once-only step of the live enterprise, guarded by
// Live's lock (runPrior, armAgentChaos, agentDone, Env.Result), and the
// activities drive it from three places: RunAgent, the model-driven
// agent's StartAgent/AgentToolCall/FinishAgent (whose conversation and via
// path, llmState and viaState, live on Live under that lock) and
// Live.Replay (its replayed state too); Live.Truth reads the via path's
// recorded subjects. A package of its own for Live would have to export
// that lock-held state and the step's internals to the activities, its one
// caller. What has callers outside (the catalogue, the results) is cut
// out.
package harness
