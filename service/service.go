// Package service holds CommitLayer's application services between an edge
// (the HTTP API, the console, the OTLP ingest, the sandbox harness) and the
// store and Temporal, so every caller gets the same defaults, checks and
// errors. Errors meant for the caller are *commitlayer.Error values; store
// errors pass through wrapped, keeping their kind.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/postgres"
)

// Error codes of the errors this package returns.
const (
	CodeUnknownContract = "unknown_contract"
	CodeInvalidContract = "invalid_contract"
	CodeSubjectMismatch = "subject_mismatch"
)

// ContractStore is what loading a contract needs from the store.
type ContractStore interface {
	GetContract(ctx context.Context, tenantID, contractID string, version int) (commitlayer.ContractRecord, error)
}

// DefaultContractCacheSize bounds the compiled contracts a process keeps.
const DefaultContractCacheSize = 1024

// Contracts loads stored contract versions compiled. A stored version never
// changes, so a compiled one is kept (LRU) and never goes stale; asking for
// the latest version always reads which one that is.
type Contracts struct {
	store ContractStore
	cache *lru.Cache[string, *contracts.Contract]
}

// NewContracts returns a loader keeping at most size compiled contracts
// (DefaultContractCacheSize when size <= 0).
func NewContracts(store ContractStore, size int) *Contracts {
	if size <= 0 {
		size = DefaultContractCacheSize
	}
	cache, err := lru.New[string, *contracts.Contract](size)
	if err != nil {
		panic(err) // only for size <= 0, excluded above
	}
	return &Contracts{store: store, cache: cache}
}

func contractKey(tenantID, id string, version int) string {
	return fmt.Sprintf("%s\x00%s\x00%d", tenantID, id, version)
}

// Load returns version of the contract (0: the latest) compiled. An unknown
// contract or version is ErrInvalid with CodeUnknownContract (the caller
// named it); a stored version that no longer compiles (the language
// changed) is ErrInvalid with CodeInvalidContract.
func (c *Contracts) Load(ctx context.Context, tenantID, id string, version int) (commitlayer.ContractRecord, *contracts.Contract, error) {
	if version > 0 {
		if cc, ok := c.cache.Get(contractKey(tenantID, id, version)); ok {
			return commitlayer.ContractRecord{ID: id, Version: version}, cc, nil
		}
	}
	rec, err := c.store.GetContract(ctx, tenantID, id, version)
	switch {
	case errors.Is(err, commitlayer.ErrNotFound) && version > 0:
		return rec, nil, commitlayer.Errorf(commitlayer.ErrInvalid, CodeUnknownContract, "contract %q has no version %d", commitlayer.Clip(id, 128), version)
	case errors.Is(err, commitlayer.ErrNotFound):
		return rec, nil, commitlayer.Errorf(commitlayer.ErrInvalid, CodeUnknownContract, "no contract %q; post it to /v1/contracts first", commitlayer.Clip(id, 128))
	case err != nil:
		return rec, nil, fmt.Errorf("load contract %q: %w", id, err)
	}
	key := contractKey(tenantID, rec.ID, rec.Version)
	if cc, ok := c.cache.Get(key); ok {
		return rec, cc, nil
	}
	cc, err := contracts.Parse(rec.Source)
	if err != nil {
		return rec, nil, &StaleContractError{ID: rec.ID, Version: rec.Version, Err: err}
	}
	c.cache.Add(key, cc)
	return rec, cc, nil
}

// Remember keeps a contract version just stored, compiled, so its first use
// does not compile it again.
func (c *Contracts) Remember(tenantID string, rec commitlayer.ContractRecord, cc *contracts.Contract) {
	c.cache.Add(contractKey(tenantID, rec.ID, rec.Version), cc)
}

// Len is the number of compiled contracts kept.
func (c *Contracts) Len() int { return c.cache.Len() }

// StaleContractError is a stored contract version that no longer compiles.
// Err holds every problem (contracts.Errors lists them).
type StaleContractError struct {
	ID      string
	Version int
	Err     error
}

func (e *StaleContractError) Error() string {
	var msgs []string
	for _, ce := range contracts.Errors(e.Err) {
		msgs = append(msgs, ce.Error())
	}
	return fmt.Sprintf("stored contract %s version %d no longer compiles: %s", e.ID, e.Version, strings.Join(msgs, "; "))
}

// Unwrap makes it ErrInvalid.
func (e *StaleContractError) Unwrap() []error { return []error{commitlayer.ErrInvalid, e.Err} }

// ActionStore is what recording and verifying actions need from the store
// (*postgres.DB has it).
type ActionStore interface {
	ContractStore
	CreateAction(ctx context.Context, tenantID string, a commitlayer.Action, settlesAt, watchUntil time.Time,
		idempotencyKey string, requestHash []byte) (commitlayer.ActionRecord, bool, error)
	LatestVerdict(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error)
	FactsOfKinds(ctx context.Context, tenantID string, kinds []commitlayer.FactType, from, to time.Time) ([]commitlayer.Fact, error)
	ActionsOfContract(ctx context.Context, tenantID, contractID string, since time.Time) ([]commitlayer.Action, error)
	// What a start's bookkeeping and the notices' delivery read and write.
	VerificationStarted(ctx context.Context, tenantID, actionID string) error
	StartFailed(ctx context.Context, tenantID, actionID, reason string) (bool, error)
	ListConnectors(ctx context.Context, tenantID string) ([]commitlayer.Connector, error)
	LinkedSubjects(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Subject, error)
	WatchedActions(ctx context.Context, tenantID string, subjects []commitlayer.Subject, now time.Time) ([]commitlayer.ActionRecord, error)
	LatestVerdictHeads(ctx context.Context, tenantID string, actionIDs []string) (map[string]postgres.VerdictHead, error)
	// An attempt of a recorded action (a tool call's retry).
	RecordAttempt(ctx context.Context, tenantID, actionID, key string, claim commitlayer.Claim,
		entry json.RawMessage, at time.Time, hash []byte) (commitlayer.ActionRecord, bool, error)
	// The reconciler's.
	DeliverNotifications(ctx context.Context, limit int, deliver func(context.Context, postgres.Notice) error) (int, int, error)
	PendingStarts(ctx context.Context, olderThan time.Duration, limit int) ([]commitlayer.ActionRecord, error)
	StartDeferred(ctx context.Context, tenantID, actionID string, most time.Duration, reason string) (int, error)
}

// Actions records actions and runs their verifications (verify.go), lists
// orphan effects, and delivers the notices of new facts (reconcile.go).
type Actions struct {
	store     ActionStore
	contracts *Contracts
	now       func() time.Time
	verifying
}

// NewActions returns the service. verifier may be nil (recording only: a
// start is left pending); now defaults to time.Now; logger to
// slog.Default().
func NewActions(store ActionStore, cs *Contracts, verifier Verifier, now func() time.Time, logger *slog.Logger) *Actions {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Actions{store: store, contracts: cs, now: now,
		verifying: verifying{verifier: verifier, logger: logger, bg: make(chan struct{}, maxBackground)}}
}

// Record records an action, without starting its verification:
// requested_at defaults to now, the contract's version is pinned (the
// latest unless the action names one), the subject's type must be the
// contract's, and the idempotency key (with the request's hash) makes a
// retry return the same action (created false). Errors: *commitlayer.Error
// for an unknown contract or a subject of another type; from the store,
// errors wrapping commitlayer.ErrConflict or commitlayer.ErrInvalid.
func (s *Actions) Record(ctx context.Context, tenantID string, a commitlayer.Action, idempotencyKey string, requestHash []byte) (commitlayer.ActionRecord, bool, error) {
	if a.RequestedAt.IsZero() {
		a.RequestedAt = s.now().UTC()
	}
	rec, c, err := s.contracts.Load(ctx, tenantID, a.Contract, a.ContractVersion)
	if err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	if !c.ActsOn(a.Subject) {
		return commitlayer.ActionRecord{}, false, commitlayer.Errorf(commitlayer.ErrInvalid, CodeSubjectMismatch,
			"subject: contract %s acts on %q subjects, not %q", c.ID(), c.Spec.Subject, a.Subject.Type())
	}
	a.ContractVersion = rec.Version
	stored, created, err := s.store.CreateAction(ctx, tenantID, a, c.SettlesAt(a.RequestedAt), c.WatchUntil(a.RequestedAt), idempotencyKey, requestHash)
	if err != nil {
		return commitlayer.ActionRecord{}, false, fmt.Errorf("create action: %w", err)
	}
	return stored, created, nil
}

// Orphans lists the effects of the kinds a contract expects or forbids that
// occurred in [since, until] on subjects with no recorded action of it
// (directly or through links).
func (s *Actions) Orphans(ctx context.Context, tenantID, contractID string, since, until time.Time) ([]contracts.Orphan, error) {
	_, c, err := s.contracts.Load(ctx, tenantID, contractID, 0)
	if err != nil {
		return nil, err
	}
	facts, err := s.store.FactsOfKinds(ctx, tenantID, c.EffectKinds(), since, until)
	if err != nil {
		return nil, fmt.Errorf("orphans: facts: %w", err)
	}
	// An effect at since may belong to an action requested up to
	// settlement + watch before it.
	actions, err := s.store.ActionsOfContract(ctx, tenantID, c.ID(), since.Add(-(c.Settlement() + c.Watch())))
	if err != nil {
		return nil, fmt.Errorf("orphans: actions: %w", err)
	}
	return contracts.Orphans(c, actions, facts), nil
}
