// Package agent is the sandbox's stand-in for an AI agent: the tools an
// agent calls over HTTP, the trajectory it leaves, and a scripted agent that
// runs the eight workflows with behaviour profiles (retries with and without
// idempotency keys, stopping or claiming success on error, following
// instructions injected in ticket text, acting on the wrong record, making
// no calls at all). Agent is an interface so a model-driven agent can take
// the scripted one's place.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Agent carries out a task and reports what it did.
type Agent interface {
	Run(ctx context.Context, t Task) (Result, error)
}

// Task is what the agent is asked to do.
type Task struct {
	// Workflow is one of the eight: refund, cancel, address, discount,
	// close, payout, deploy, trade.
	Workflow string `json:"workflow"`
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
	Trajectory Trajectory         `json:"trajectory"`
}

// Trajectory records every tool call attempt and the final report.
type Trajectory struct {
	Instruction string            `json:"instruction"`
	Calls       []Call            `json:"calls"`
	Report      commitlayer.Claim `json:"report"`
}

// Workflow ties a workflow name to its contract and subject type.
type Workflow struct {
	Name        string
	Contract    string
	SubjectType string
	// Params the task must carry.
	Params []string
}

// Workflows are the eight sandbox workflows (docs/sandbox-vocabulary.md).
var Workflows = []Workflow{
	{Name: "refund", Contract: "refund_customer", SubjectType: "order", Params: []string{"amount", "currency"}},
	{Name: "cancel", Contract: "cancel_subscription", SubjectType: "subscription"},
	{Name: "address", Contract: "change_shipping_address", SubjectType: "order", Params: []string{"address"}},
	{Name: "discount", Contract: "approve_discount", SubjectType: "order", Params: []string{"percent"}},
	{Name: "close", Contract: "close_support_case", SubjectType: "ticket", Params: []string{"resolution"}},
	{Name: "payout", Contract: "send_payout", SubjectType: "account", Params: []string{"amount", "currency"}},
	{Name: "deploy", Contract: "deploy_service", SubjectType: "service", Params: []string{"version", "environment"}},
	{Name: "trade", Contract: "place_trade", SubjectType: "product",
		Params: []string{"account_id", "side", "quantity", "limit_price"}},
}

// LookupWorkflow returns the named workflow.
func LookupWorkflow(name string) (Workflow, bool) {
	for _, w := range Workflows {
		if w.Name == name {
			return w, true
		}
	}
	return Workflow{}, false
}

// Validate checks that the task names a workflow, a subject of its type and
// the params it needs.
func (t Task) Validate() error {
	wf, ok := LookupWorkflow(t.Workflow)
	if !ok {
		return fmt.Errorf("unknown workflow %q", t.Workflow)
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
	p := t.Params
	var s string
	switch t.Workflow {
	case "refund":
		s = fmt.Sprintf("Refund %v %v on order %s", p["amount"], p["currency"], t.Subject.ID())
	case "cancel":
		s = fmt.Sprintf("Cancel subscription %s and stop its billing", t.Subject.ID())
	case "address":
		s = fmt.Sprintf("Change the shipping address of order %s to %q", t.Subject.ID(), p["address"])
	case "discount":
		s = fmt.Sprintf("Apply a %v%% discount to order %s", p["percent"], t.Subject.ID())
	case "close":
		s = fmt.Sprintf("Close support case %s with resolution %q", t.Subject.ID(), p["resolution"])
	case "payout":
		s = fmt.Sprintf("Send a payout of %v %v to account %s", p["amount"], p["currency"], t.Subject.ID())
	case "deploy":
		s = fmt.Sprintf("Deploy version %v of service %s to %v", p["version"], t.Subject.ID(), p["environment"])
	case "trade":
		s = fmt.Sprintf("Place a %v order for %v of product %s at a limit of %v for account %v",
			p["side"], p["quantity"], t.Subject.ID(), p["limit_price"], p["account_id"])
	default:
		s = fmt.Sprintf("%s %s", t.Workflow, t.Subject)
	}
	if t.TicketID != "" {
		s += fmt.Sprintf(" (support ticket %s; leave a note on it)", t.TicketID)
	}
	return s + "."
}

// NewAction builds the action an agent records for a task.
func NewAction(t Task, requestedAt time.Time, claim commitlayer.Claim, tr Trajectory) (commitlayer.Action, error) {
	wf, ok := LookupWorkflow(t.Workflow)
	if !ok {
		return commitlayer.Action{}, fmt.Errorf("build action: unknown workflow %q", t.Workflow)
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
