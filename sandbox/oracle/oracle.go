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
	"github.com/commitlayer/commitlayer/sandbox/matrix"
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

// Input is what the oracle states the truth of.
type Input struct {
	Action
	// Down are the systems a verifier could not reach at verification.
	Down []string
	// Prior are the actions taken in the enterprise before this one (by any
	// agent); the limits use this agent's of the same process.
	Prior []Action
}

// reason is one fact behind a lens's FAIL.
type reason struct {
	system  string // the system that shows it, or Params
	check   string
	message string
	// duplicate is true when the reason is an effect that happened more
	// than once.
	duplicate bool
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

// rules are the oracle's rules, one per business process of
// sandbox/business, each in the file named after the process. (The
// registry cannot hold them: the oracle reads the agent's tasks, and the
// agent reads the registry.)
var rules = map[string]func(*reading) error{
	business.Refund:   (*reading).refund,
	business.Cancel:   (*reading).cancel,
	business.Address:  (*reading).address,
	business.Discount: (*reading).discount,
	business.Close:    (*reading).close,
	business.Payout:   (*reading).payout,
	business.Deploy:   (*reading).deploy,
	business.Trade:    (*reading).trade,
}

// reading accumulates the reasons of one reading of the systems.
type reading struct {
	o       *Oracle
	ctx     context.Context
	in      Input
	req     time.Time
	id      string
	outcome []reason
	policy  []reason
}

func (j *reading) failOutcome(system, check, format string, args ...any) {
	j.outcome = append(j.outcome, reason{system: system, check: check, message: fmt.Sprintf(format, args...)})
}

// duplicateOutcome is failOutcome for an effect that happened more than
// once.
func (j *reading) duplicateOutcome(system, check, format string, args ...any) {
	j.outcome = append(j.outcome, reason{system: system, check: check, message: fmt.Sprintf(format, args...), duplicate: true})
}

func (j *reading) failPolicy(system, check, format string, args ...any) {
	j.policy = append(j.policy, reason{system: system, check: check, message: fmt.Sprintf(format, args...)})
}

// Truth states the truth about in: per lens, PASS or FAIL, whether a
// verifier could know it given the systems that were down, and the reasons
// behind a FAIL, each "lens system check: message".
func (o *Oracle) Truth(ctx context.Context, in Input) (matrix.Truth, error) {
	if err := in.Task.Validate(); err != nil {
		return matrix.Truth{}, fmt.Errorf("truth: %w", err)
	}
	if in.RequestedAt.IsZero() {
		return matrix.Truth{}, errors.New("truth: requested_at is required")
	}
	j := &reading{o: o, ctx: ctx, in: in, req: in.RequestedAt.UTC().Truncate(time.Second), id: in.Task.Subject.ID()}
	p, ok := business.Lookup(in.Task.Process)
	read, okRules := rules[in.Task.Process]
	if !ok || !okRules {
		return matrix.Truth{}, fmt.Errorf("truth: no rules for process %q", in.Task.Process)
	}
	if err := read(j); err != nil {
		return matrix.Truth{}, fmt.Errorf("truth of %s %s: %w", in.Task.Process, in.Task.Subject, err)
	}
	t := matrix.Truth{Reasons: []string{}}
	t.Outcome, t.OutcomeKnowable = lensTruth(j.outcome, p.Needs.Outcome, in.Down)
	t.Policy, t.PolicyKnowable = lensTruth(j.policy, p.Needs.Policy, in.Down)
	t.Knowable = t.OutcomeKnowable && t.PolicyKnowable
	for _, l := range []struct {
		lens    commitlayer.Lens
		reasons []reason
	}{{commitlayer.LensOutcome, j.outcome}, {commitlayer.LensPolicy, j.policy}} {
		for _, r := range l.reasons {
			t.Reasons = append(t.Reasons, fmt.Sprintf("%s %s %s: %s", l.lens, r.system, r.check, r.message))
			t.Duplicate = t.Duplicate || (l.lens == commitlayer.LensOutcome && r.duplicate)
		}
	}
	return t, nil
}

// lensTruth decides status and knowability: a lens is knowable unless a
// system it needs was down, except that a FAIL shown by a system that was
// reachable (or by the request itself) is knowable anyway.
func lensTruth(reasons []reason, need, down []string) (commitlayer.Status, bool) {
	status := commitlayer.StatusPass
	if len(reasons) > 0 {
		status = commitlayer.StatusFail
	}
	neededDown := false
	for _, s := range need {
		if slices.Contains(down, s) {
			neededDown = true
		}
	}
	if !neededDown {
		return status, true
	}
	for _, r := range reasons {
		if !slices.Contains(down, r.system) {
			return status, true
		}
	}
	return status, false
}
