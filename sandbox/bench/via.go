package bench

import (
	"go.temporal.io/sdk/workflow"

	"github.com/commitlayer/commitlayer/sandbox/harness"
)

// changeVia versions the via paths of a model-driven run (harness
// agent.Spec.Via: the MCP gateway or the trace ingest records the agent's
// actions, not the harness): the scenario starts a verification for each
// action the path recorded, and one that recorded none for the task has
// no verdict to wait for. Only runs started with a via path take it, so
// histories recorded before it replay unchanged.
const changeVia = "llm-via-recorded-actions"

// startAgentVerifications starts the verification of the agent's action
// (the direct path's one), or, on a via path, of every action the path
// recorded: the task's first, when there is one.
func (s *scenarioRun) startAgentVerifications(ctx workflow.Context, res harness.AgentResult) error {
	if s.in.Agent == nil || s.in.Agent.Via == "" {
		return s.startVerification(ctx, res.Recorded)
	}
	workflow.GetVersion(ctx, changeVia, workflow.DefaultVersion, 1)
	if res.Recorded.Action.ID != "" {
		if err := s.startVerification(ctx, res.Recorded); err != nil {
			return err
		}
	}
	for _, r := range res.Also {
		if err := s.startVerification(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
