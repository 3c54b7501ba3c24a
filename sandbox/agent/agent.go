// Package agent is the sandbox's stand-in for an AI agent: the tools an
// agent calls over HTTP, the trajectory it leaves, and a scripted agent that
// runs the eight business processes of sandbox/business (their scripts)
// with behaviour profiles (retries with and without idempotency keys,
// stopping or claiming success on error, following instructions injected
// in ticket text, acting on the wrong record, making no calls at all). Agent is an interface so a model-driven agent can take
// the scripted one's place.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/business"
)

// Agent carries out a task and reports what it did.
type Agent interface {
	Run(ctx context.Context, t Task) (Result, error)
}

// Task is what the agent is asked to do.
type Task struct {
	// Process names the business process, one of the eight of
	// sandbox/business: refund, cancel, address, discount, close, payout,
	// deploy, trade. (The JSON name "workflow" is kept for recorded
	// histories.)
	Process string `json:"workflow"`
	// Subject is the record the task is about ("order:o_1001").
	Subject commitlayer.Subject `json:"subject"`
	// Params are the action's params (amount, currency, ticket_id, …).
	Params commitlayer.Attrs `json:"params"`
	// TicketID is the support ticket behind the task, if any.
	TicketID string `json:"ticket_id,omitempty"`
	// AgentID names the agent in the recorded action.
	AgentID string `json:"agent_id"`
	// Instruction is the task in words, as a model would be given it;
	// empty means the one Prompt builds.
	Instruction string `json:"instruction,omitempty"`
}

// Result is the action the agent reports and how it got there.
type Result struct {
	Action     commitlayer.Action `json:"action"`
	Trajectory llm.Trajectory     `json:"trajectory"`
}

// Validate checks that the task names a business process, a subject of its
// type and the params it needs.
func (t Task) Validate() error {
	wf, ok := business.Lookup(t.Process)
	if !ok {
		return fmt.Errorf("unknown workflow %q", t.Process)
	}
	if _, err := commitlayer.ParseSubject(string(t.Subject)); err != nil {
		return err
	}
	if t.Subject.Type() != wf.SubjectType {
		return fmt.Errorf("workflow %s acts on a %s, not %q", wf.Name, wf.SubjectType, t.Subject)
	}
	if t.AgentID == "" {
		return fmt.Errorf("agent id is required")
	}
	for _, p := range wf.Params {
		if v, ok := t.Params[p]; !ok || v == nil || v == "" {
			return fmt.Errorf("workflow %s needs param %q", wf.Name, p)
		}
	}
	return nil
}

// Prompt is the task in words.
func (t Task) Prompt() string {
	if t.Instruction != "" {
		return t.Instruction
	}
	s := fmt.Sprintf("%s %s", t.Process, t.Subject)
	if proc, ok := business.Lookup(t.Process); ok {
		s = proc.Prompt(t.Subject.ID(), t.Params)
	}
	if t.TicketID != "" {
		s += fmt.Sprintf(" (support ticket %s; leave a note on it)", t.TicketID)
	}
	return s + "."
}

// NewAction builds the action an agent records for a task.
func NewAction(t Task, requestedAt time.Time, claim commitlayer.Claim, tr llm.Trajectory) (commitlayer.Action, error) {
	wf, ok := business.Lookup(t.Process)
	if !ok {
		return commitlayer.Action{}, fmt.Errorf("build action: unknown workflow %q", t.Process)
	}
	params, err := t.Params.Normalize()
	if err != nil {
		return commitlayer.Action{}, fmt.Errorf("build action: params: %w", err)
	}
	if params == nil {
		params = commitlayer.Attrs{}
	}
	if t.TicketID != "" {
		if _, ok := params["ticket_id"]; !ok {
			params["ticket_id"] = t.TicketID
		}
	}
	trace, err := json.Marshal(tr)
	if err != nil {
		return commitlayer.Action{}, fmt.Errorf("build action: trace: %w", err)
	}
	return commitlayer.Action{
		Contract:    wf.Contract,
		Agent:       t.AgentID,
		Subject:     t.Subject,
		Params:      params,
		RequestedAt: requestedAt.UTC(),
		Claim:       claim,
		Trace:       trace,
	}, nil
}
