// Package oracle states the truth about an agent's task by reading the
// sandbox systems' SQLite files directly. It never asks CommitLayer and never
// reads a contract: its business rules are written here, one file per
// business process of sandbox/business (refund.go, cancel.go, …), from the
// sandbox vocabulary, so a verdict can be scored against them. The systems
// each lens reads and the kinds of effect a process produces or forbids
// are in the process's registry entry.
//
// For each task it answers both lenses: outcome (did the requested effects
// happen in the systems, exactly once, as asked, and stay) and policy (was
// the action allowed: eligibility on the state before the action, the
// agent's limits over its earlier actions in the window, no forbidden side
// effects). Every reason names the system that shows it, and each lens says
// whether a verifier could know its truth given the systems that were down.
package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// Params is the pseudo-system of reasons shown by the request itself (an
// amount over the limit): a verifier always knows them.
const Params = "params"

// Window is the span of the daily limits (docs/sandbox-vocabulary.md and
// the contract brief); each limit is in its process's file.
const Window = 24 * time.Hour

// Action is an action taken in the enterprise: what was asked, by whom, and
// when (the enterprise clock at the start).
type Action struct {
	Task        agent.Task
	RequestedAt time.Time
}

// Input is what the oracle judges.
type Input struct {
	Action
	// Down are the systems a verifier could not reach at verification.
	Down []string
	// Prior are the actions taken in the enterprise before this one (by any
	// agent); the limits use this agent's of the same workflow.
	Prior []Action
}

// Reason is one fact behind a lens's truth.
type Reason struct {
	System  string `json:"system"` // the system that shows it, or Params
	Check   string `json:"check"`
	Message string `json:"message"`
	// Duplicate is true when the reason is an effect that happened more
	// than once.
	Duplicate bool `json:"duplicate,omitempty"`
}

// LensTruth is the truth on one lens.
type LensTruth struct {
	Status   commitlayer.Status `json:"status"` // PASS or FAIL
	Knowable bool               `json:"knowable"`
	Reasons  []Reason           `json:"reasons"`
	// Needs are the systems this lens's truth is read from.
	Needs []string `json:"needs"`
}

// Expected is what a correct verifier answers on this lens: the truth when
// it is knowable, UNKNOWN otherwise.
func (l LensTruth) Expected() commitlayer.Status {
	if !l.Knowable {
		return commitlayer.StatusUnknown
	}
	return l.Status
}

// Truth is the oracle's answer.
type Truth struct {
	Outcome LensTruth `json:"outcome"`
	Policy  LensTruth `json:"policy"`
}

// Knowable is true when both lenses are.
func (t Truth) Knowable() bool { return t.Outcome.Knowable && t.Policy.Knowable }

// Lens returns one lens.
func (t Truth) Lens(l commitlayer.Lens) LensTruth {
	if l == commitlayer.LensPolicy {
		return t.Policy
	}
	return t.Outcome
}

func (t Truth) String() string {
	var b strings.Builder
	for _, l := range []struct {
		name string
		lt   LensTruth
	}{{"outcome", t.Outcome}, {"policy", t.Policy}} {
		fmt.Fprintf(&b, "%s=%s", l.name, l.lt.Status)
		if !l.lt.Knowable {
			b.WriteString("(unknowable)")
		}
		for _, r := range l.lt.Reasons {
			fmt.Fprintf(&b, " [%s %s: %s]", r.System, r.Check, r.Message)
		}
		b.WriteString("; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// Oracle reads one enterprise's files.
type Oracle struct {
	dbs map[string]*sql.DB
}

// Open opens the seven systems' files read-only; path gives a system's file
// (an Enterprise's DBPath).
func Open(path func(system string) string) (*Oracle, error) {
	o := &Oracle{dbs: map[string]*sql.DB{}}
	for _, name := range systems.Names {
		p := path(name)
		if p == "" {
			o.Close()
			return nil, fmt.Errorf("open oracle: no file for system %s", name)
		}
		db, err := sql.Open("sqlite", readOnlyDSN(p))
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("open oracle: %s: %w", name, err)
		}
		if err := db.Ping(); err != nil {
			db.Close()
			o.Close()
			return nil, fmt.Errorf("open oracle: %s: %w", name, err)
		}
		o.dbs[name] = db
	}
	return o, nil
}

// readOnlyDSN makes a read-only SQLite URI for path, escaping the characters
// a URI would otherwise read as a query or fragment.
func readOnlyDSN(path string) string {
	u := url.URL{Scheme: "file", Opaque: (&url.URL{Path: path}).EscapedPath()}
	u.Opaque = strings.NewReplacer("?", "%3F", "#", "%23").Replace(u.Opaque)
	return u.String() + "?mode=ro&_pragma=busy_timeout(5000)"
}

// Close closes the files.
func (o *Oracle) Close() error {
	var errs []error
	for _, db := range o.dbs {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
}

// judges are the oracle's rules, one per business process of
// sandbox/business, each in the file named after the process. (The
// registry cannot hold them: the oracle reads the agent's tasks, and the
// agent reads the registry.)
var judges = map[string]func(*judge) error{
	business.Refund:   (*judge).refund,
	business.Cancel:   (*judge).cancel,
	business.Address:  (*judge).address,
	business.Discount: (*judge).discount,
	business.Close:    (*judge).close,
	business.Payout:   (*judge).payout,
	business.Deploy:   (*judge).deploy,
	business.Trade:    (*judge).trade,
}

// judge accumulates the reasons of one judgement.
type judge struct {
	o       *Oracle
	ctx     context.Context
	in      Input
	req     time.Time
	id      string
	outcome []Reason
	policy  []Reason
}

func (j *judge) failOutcome(system, check, format string, args ...any) {
	j.outcome = append(j.outcome, Reason{System: system, Check: check, Message: fmt.Sprintf(format, args...)})
}

// duplicateOutcome is failOutcome for an effect that happened more than
// once.
func (j *judge) duplicateOutcome(system, check, format string, args ...any) {
	j.outcome = append(j.outcome, Reason{System: system, Check: check, Message: fmt.Sprintf(format, args...), Duplicate: true})
}

func (j *judge) failPolicy(system, check, format string, args ...any) {
	j.policy = append(j.policy, Reason{System: system, Check: check, Message: fmt.Sprintf(format, args...)})
}

// Judge states the truth about in.
func (o *Oracle) Judge(ctx context.Context, in Input) (Truth, error) {
	if err := in.Task.Validate(); err != nil {
		return Truth{}, fmt.Errorf("judge: %w", err)
	}
	if in.RequestedAt.IsZero() {
		return Truth{}, errors.New("judge: requested_at is required")
	}
	j := &judge{o: o, ctx: ctx, in: in, req: in.RequestedAt.UTC().Truncate(time.Second), id: in.Task.Subject.ID()}
	p, ok := business.Lookup(in.Task.Workflow)
	rules, okRules := judges[in.Task.Workflow]
	if !ok || !okRules {
		return Truth{}, fmt.Errorf("judge: no rules for workflow %q", in.Task.Workflow)
	}
	err := rules(j)
	if err != nil {
		return Truth{}, fmt.Errorf("judge %s %s: %w", in.Task.Workflow, in.Task.Subject, err)
	}
	return Truth{
		Outcome: lensTruth(j.outcome, p.Needs.Outcome, in.Down),
		Policy:  lensTruth(j.policy, p.Needs.Policy, in.Down),
	}, nil
}

// lensTruth decides status and knowability: a lens is knowable unless a
// system it needs was down, except that a FAIL shown by a system that was
// reachable (or by the request itself) is knowable anyway.
func lensTruth(reasons []Reason, need, down []string) LensTruth {
	lt := LensTruth{Status: commitlayer.StatusPass, Knowable: true, Reasons: reasons, Needs: need}
	if lt.Reasons == nil {
		lt.Reasons = []Reason{}
	}
	if len(reasons) > 0 {
		lt.Status = commitlayer.StatusFail
	}
	neededDown := false
	for _, s := range need {
		if slices.Contains(down, s) {
			neededDown = true
		}
	}
	if !neededDown {
		return lt
	}
	lt.Knowable = false
	for _, r := range reasons {
		if !slices.Contains(down, r.System) {
			lt.Knowable = true
		}
	}
	return lt
}
