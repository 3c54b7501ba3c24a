// Package business is the registry of the sandbox's eight business
// processes: refund a customer, cancel a subscription, change a shipping
// address, approve a discount, close a support case, send a payout, deploy
// a service, place a trade (docs/sandbox-vocabulary.md). Each process has
// one entry, a Process, in a file of its own (refund.go, cancel.go, …): its
// name, the contract its action is recorded under, the subject type and
// params its task needs, its main write (system, chaos route, tool), its
// base task in the default seed, the task in words, the scripted agent's
// calls and report, and the oracle's view of it (the systems each lens
// reads, the kinds of effect its task produces or forbids). The oracle's
// judge of each process is in sandbox/oracle, one file per process, looked
// up by the process's name (the oracle sits above this package: it reads
// the agent's tasks).
//
// Words: a "process" (business process) is what an agent is asked to do in
// the enterprise. A "workflow" is a Temporal workflow (sandbox/bench,
// workflows/). Fields recorded before this package existed keep the old
// word for a process's name (agent.Task.Process, catalogue.Scenario.Process,
// JSON "workflow") because recorded histories and results carry it.
//
// Nothing here reads a contract: the oracle's view is written from the
// sandbox vocabulary, and a test checks that the systems it reads are the
// contract's sources.
package business

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/commitlayer/commitlayer"
)

// The processes' names.
const (
	Refund   = "refund"
	Cancel   = "cancel"
	Address  = "address"
	Discount = "discount"
	Close    = "close"
	Payout   = "payout"
	Deploy   = "deploy"
	Trade    = "trade"
)

// Process is one business process's entry.
type Process struct {
	// Name is the process's short name ("refund").
	Name string
	// Contract is the id of the contract its action is recorded under.
	Contract string
	// SubjectType is the type of the record the task is about ("order").
	SubjectType string
	// Params are the params the task must carry.
	Params []string
	// Write is the process's main write: its first effect call.
	Write Write
	// base is the task in the default seed; Base returns a copy.
	base Base
	// Prompt is the task in words, for the record with id and params p.
	Prompt func(id string, p commitlayer.Attrs) string
	// Report is what the scripted agent reports when the task is done.
	Report func(id string, p commitlayer.Attrs) string
	// Script is the scripted agent's calls (docs/sandbox-vocabulary.md,
	// "agent's calls").
	Script func(ctx context.Context, s Steps) error
	// Needs are the systems the oracle reads each lens's truth from.
	Needs Needs
	// Effects are the kinds of effect the task produces or forbids, as the
	// oracle reads them to find stray effects (the truth behind orphans).
	Effects []Effect
}

// Write is a process's main write: its first effect call (for close, the
// closing of the ticket, which follows the resolution note).
type Write struct {
	System string // "payments"
	Route  string // chaos route pattern, "POST /payments/refunds"
	Tool   string // the agent's tool, "refund"
}

// Base is a process's task when nothing is changed: a record the default
// seed makes eligible, the ticket it belongs to ("" for none) and the
// params.
type Base struct {
	Subject commitlayer.Subject
	Ticket  string
	Params  commitlayer.Attrs
}

// Needs are the systems each lens's truth is read from.
type Needs struct {
	Outcome, Policy []string
}

// All is every system either lens reads, each once, outcome's first.
func (n Needs) All() []string {
	var out []string
	for _, s := range append(append([]string{}, n.Outcome...), n.Policy...) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Effect is a kind of event: a system's event type, optionally only with
// one of the given values of an attr.
type Effect struct {
	System, Type string
	Attr         string
	Values       []string
}

// Steps are what a script does, carried out by an agent (the scripted
// agent of sandbox/agent): tool calls over HTTP, retried and keyed as the
// agent's profile says. A call that fails for good returns an error that
// stops the script.
type Steps interface {
	// ID is the id of the record acted on: the task subject's, unless the
	// agent acts on another.
	ID() string
	// Ticket is the support ticket behind the task ("" for none).
	Ticket() string
	// Read makes a read call and returns the object it answered.
	Read(ctx context.Context, tool string, args map[string]any) (map[string]any, error)
	// Call makes a write call.
	Call(ctx context.Context, tool string, args map[string]any) error
	// ReadTicket reads a ticket and its notes (whose text may carry
	// instructions).
	ReadTicket(ctx context.Context, id string) error
	// Note adds a note to the task's ticket; nothing without a ticket.
	Note(ctx context.Context, body string) error
	// Param is the value the agent sends for a task param.
	Param(name string) any
	// Fail stops the script at tool, for a reason the agent saw.
	Fail(tool, reason string) error
}

// readTicket reads the task's ticket, if it has one.
func readTicket(ctx context.Context, s Steps) error {
	if s.Ticket() == "" {
		return nil
	}
	return s.ReadTicket(ctx, s.Ticket())
}

// processes are the eight, in catalogue order.
var processes = []Process{refund, cancel, address, discount, closeCase, payout, deploy, trade}

// All returns the eight processes in catalogue order. Every call returns
// fresh slices, so callers may change them.
func All() []Process {
	out := make([]Process, len(processes))
	for i, p := range processes {
		out[i] = p.clone()
	}
	return out
}

// Names lists the processes' names in catalogue order.
func Names() []string {
	out := make([]string, len(processes))
	for i, p := range processes {
		out[i] = p.Name
	}
	return out
}

// Lookup returns the named process.
func Lookup(name string) (Process, bool) {
	for _, p := range processes {
		if p.Name == name {
			return p.clone(), true
		}
	}
	return Process{}, false
}

// Base returns the process's base task, with params of its own.
func (p Process) Base() Base {
	b := p.base
	b.Params = maps.Clone(b.Params)
	if b.Params == nil {
		b.Params = commitlayer.Attrs{}
	}
	return b
}

func (p Process) clone() Process {
	c := p
	c.Params = append([]string(nil), p.Params...)
	c.base = p.Base()
	c.Needs = Needs{Outcome: append([]string(nil), p.Needs.Outcome...), Policy: append([]string(nil), p.Needs.Policy...)}
	c.Effects = make([]Effect, len(p.Effects))
	for i, e := range p.Effects {
		e.Values = append([]string(nil), e.Values...)
		c.Effects[i] = e
	}
	return c
}

// Money formats minor units for a note or a report ("25.00 USD").
func Money(amount, currency any) string {
	n, ok := Int(amount)
	if !ok {
		return fmt.Sprintf("%v %v", amount, currency)
	}
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	return fmt.Sprintf("%s%d.%02d %v", sign, n/100, n%100, currency)
}

// Int reads an integer param or response field of any numeric type.
func Int(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}
