package benchstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// agentStep names one step of a model-driven agent in a benchmark
// scenario: a model turn or a tool call, by its index.
type agentStep struct {
	RunID      string
	ScenarioID string
	Kind       string // "turn" or "call"
	Index      int
}

func (s agentStep) valid() error {
	if s.RunID == "" || s.ScenarioID == "" || (s.Kind != "turn" && s.Kind != "call") || s.Index < 0 {
		return fmt.Errorf("%w: agent step needs a run, a scenario, kind turn or call and an index ≥ 0 (got %+v)", commitlayer.ErrInvalid, s)
	}
	return nil
}

// BeginAgentStep writes the row of a model-driven agent's step (kind
// "turn" or "call", by index, in a benchmark run's scenario) ahead of
// acting on it, or reads the row an earlier attempt wrote: its result when
// it finished, started when it did not (its worker stopped in the middle).
// A row written for another request (another hash) is an error: the retry
// is not the same step.
func (b *Store) BeginAgentStep(ctx context.Context, runID, scenarioID, kind string, index int, requestHash []byte) (result json.RawMessage, started bool, err error) {
	s := agentStep{runID, scenarioID, kind, index}
	if err := s.valid(); err != nil {
		return nil, false, err
	}
	tag, err := b.pool.Exec(ctx, `INSERT INTO benchmark.agent_steps (run_id, scenario_id, kind, idx, request_hash)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, s.RunID, s.ScenarioID, s.Kind, s.Index, requestHash)
	if err != nil {
		return nil, false, fmt.Errorf("begin agent %s %d: %w", s.Kind, s.Index, classify(err))
	}
	if tag.RowsAffected() == 1 {
		return nil, false, nil
	}
	var hash, raw []byte
	err = b.pool.QueryRow(ctx, `SELECT request_hash, result FROM benchmark.agent_steps
		WHERE run_id = $1 AND scenario_id = $2 AND kind = $3 AND idx = $4`, s.RunID, s.ScenarioID, s.Kind, s.Index).Scan(&hash, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("begin agent %s %d: the row went away", s.Kind, s.Index)
	} else if err != nil {
		return nil, false, fmt.Errorf("begin agent %s %d: %w", s.Kind, s.Index, classify(err))
	}
	if !bytes.Equal(hash, requestHash) {
		return nil, false, fmt.Errorf("%w: agent %s %d of %s/%s was begun for another request", commitlayer.ErrInvalid,
			s.Kind, s.Index, s.RunID, s.ScenarioID)
	}
	if raw == nil {
		return nil, true, nil
	}
	return raw, false, nil
}

// CompleteAgentStep records the step's answer. The first answer stays: a
// second completion (two attempts racing) leaves it and returns it.
func (b *Store) CompleteAgentStep(ctx context.Context, runID, scenarioID, kind string, index int, result json.RawMessage) (json.RawMessage, error) {
	s := agentStep{runID, scenarioID, kind, index}
	if err := s.valid(); err != nil {
		return nil, err
	}
	if !json.Valid(result) {
		return nil, fmt.Errorf("%w: agent %s %d: the result is not JSON", commitlayer.ErrInvalid, s.Kind, s.Index)
	}
	var stored []byte
	err := b.pool.QueryRow(ctx, `UPDATE benchmark.agent_steps
		SET result = COALESCE(result, $5::jsonb), completed_at = COALESCE(completed_at, now())
		WHERE run_id = $1 AND scenario_id = $2 AND kind = $3 AND idx = $4 RETURNING result`,
		s.RunID, s.ScenarioID, s.Kind, s.Index, []byte(result)).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("complete agent %s %d: %w: it was never begun", s.Kind, s.Index, commitlayer.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("complete agent %s %d: %w", s.Kind, s.Index, classify(err))
	}
	return stored, nil
}
