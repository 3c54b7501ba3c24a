package bench

// Request is what a benchmark run is asked to do: the body of POST
// /v1/admin/benchmark (sandbox/benchapi) and what `commitlayer sandbox`
// builds from its flags. Runner.Start checks what it names (422); benchapi
// checks its shape first (400).
type Request struct {
	// Only restricts the run to scenarios whose id starts with one of these
	// prefixes ("refund/"); empty means all.
	Only []string `json:"only,omitempty"`
	// Concurrency bounds the scenarios run at once; 0 means the runner's
	// default.
	Concurrency int `json:"concurrency,omitempty"`
	// Payments names the sandbox's payments backend: "sandbox" (default),
	// "stripe-fake" or "stripe". A name only: a key never travels in a
	// request; the worker reads it from its own environment.
	Payments string `json:"payments,omitempty"`
	// Agent names the agent's kind (AgentKinds, checked by CheckAgent):
	// "scripted" (default, also ""), "llm" (a model drives the same
	// tools) or "replay" (implied by ReplayOf). Provider names the model's
	// provider (agent.Providers; implies "llm") and Model its model (""
	// is the provider's default); keys stay in the worker's environment.
	Agent       string `json:"agent,omitempty"`
	Provider    string `json:"provider,omitempty"`
	Model       string `json:"model,omitempty"`
	MaxTurns    int    `json:"max_turns,omitempty"`
	MaxTokens   int    `json:"max_tokens,omitempty"`
	TokenBudget int64  `json:"token_budget,omitempty"`
	// Via is who records the model-driven agent's actions: "direct" (the
	// default, also ""; the harness), "mcp" (CommitLayer's MCP gateway in
	// front of the sandbox's tools) or "otlp" (the trace ingest, from the
	// agent's calls exported as spans). The via paths need the API in the
	// worker's process (`commitlayer sandbox`).
	Via string `json:"via,omitempty"`
	// ReplayOf names a recorded run to replay instead: its recorded tool
	// calls re-executed on fresh enterprises and verified on the current
	// engine, no model called (only, payments and repeat do not apply).
	ReplayOf string `json:"replay_of,omitempty"`
	// Repeat runs each scenario this many times (pass^k); 0 or 1 once.
	Repeat int `json:"repeat,omitempty"`
	// Judge names the model judge's provider ("anthropic" or
	// "provider/model"); its key is read from the worker's environment.
	Judge string `json:"judge,omitempty"`
	// Sinks are experiment platforms (braintrust, langsmith) the finished
	// run is logged to; their keys are read from the worker's environment.
	Sinks []string `json:"sinks,omitempty"`
}
