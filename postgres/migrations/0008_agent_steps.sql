-- The write-ahead record of a model-driven agent's steps in a benchmark
-- scenario: one row per model turn and per tool call, keyed by run,
-- scenario, kind and index. An activity writes its row before it acts and
-- the answer after; a retried activity (a worker that stopped) answers the
-- recorded result instead of paying for the turn again or repeating the
-- call. request_hash ties a retry to the request it repeats.
CREATE TABLE benchmark_agent_steps (
	run_id       text NOT NULL,
	scenario_id  text NOT NULL,
	kind         text NOT NULL CHECK (kind IN ('turn', 'call')),
	idx          integer NOT NULL CHECK (idx >= 0),
	request_hash bytea NOT NULL,
	result       jsonb,
	started_at   timestamptz NOT NULL DEFAULT now(),
	completed_at timestamptz,
	PRIMARY KEY (run_id, scenario_id, kind, idx)
);
