// Package activities holds CommitLayer's Temporal activities, methods on
// Activities (workflows call them through a nil *Activities). Every activity is
// idempotent: facts are unique per (tenant, source, external_id), cursors move
// only with their facts, and a verdict is appended only when it says something new.
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/service"
)

// Store is what the activities need from the database; *postgres.DB has it.
type Store interface {
	GetAction(ctx context.Context, tenantID, actionID string) (commitlayer.ActionRecord, error)
	GetContract(ctx context.Context, tenantID, contractID string, version int) (commitlayer.ContractRecord, error)
	ReadPass(ctx context.Context, tenantID string, r postgres.PassReadRequest) (postgres.PassRead, error)
	FactsAbout(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Fact, error)
	AppendVerdictOver(ctx context.Context, tenantID string, v commitlayer.Verdict, latest *commitlayer.Verdict, took time.Duration) (commitlayer.Verdict, bool, error)
	AppendFirstVerdict(ctx context.Context, tenantID string, v commitlayer.Verdict, took time.Duration) error
	ListConnectors(ctx context.Context, tenantID string) ([]commitlayer.Connector, error)
	RecordPulls(ctx context.Context, tenantID, exceptActionID string, pages []postgres.PulledPage, at time.Time) (commitlayer.InsertResult, error)
	RecordEmptyPulls(ctx context.Context, tenantID string, connectorIDs, cursors []string, at time.Time) ([]string, error)
	RecordPullError(ctx context.Context, tenantID, connectorID string, msg string, at time.Time) error
	CountWatchedActions(ctx context.Context, tenantID string, now time.Time) (int, error)
	EndWatch(ctx context.Context, tenantID, actionID string, at time.Time) error
	Identity(ctx context.Context) (string, error)
}

// Activities holds the dependencies of every activity, one per worker process.
type Activities struct {
	Store  Store
	Logger *slog.Logger
	// HTTPClient pulls the connectors; nil means a client with a 30 s timeout.
	HTTPClient *http.Client
	// WebhookTimeout bounds one webhook POST, dial to answer; 0 means 15 s.
	WebhookTimeout time.Duration
	// Secrets opens connectors' sealed credentials (COMMITLAYER_SECRETS_KEY);
	// nil: connectors that need one fail their pulls, reported on the source.
	Secrets *secrets.Box
	// DialFunc dials for postgres connectors (the address rules); nil: plain.
	DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)
	// Contracts loads compiled contracts; nil makes one on Store.
	Contracts *service.Contracts
	// Now is the clock verdicts are evaluated at; nil means time.Now.
	Now func() time.Time
	// PageLimit bounds the events asked for per page; 0 means 1000.
	PageLimit int
	// MaxPagesPerPull bounds one pull of one connector; 0 means 100.
	MaxPagesPerPull int

	pulls pullCoalescer // passes' pulls shared per tenant (coalesce.go)

	contractsOnce sync.Once
	identityMu    sync.Mutex
	identity      string
}

var defaultHTTPClient = &http.Client{Timeout: 30 * time.Second}

// ErrInvalidInput marks errors that no retry can fix.
const ErrInvalidInput = "InvalidInput"

func nonRetryable(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidInput, err)
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Activities) logger(ctx context.Context) *slog.Logger {
	l := a.Logger
	if l == nil {
		l = slog.Default()
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.With("activity", info.ActivityType.Name, "workflow_id", info.WorkflowExecution.ID, "attempt", info.Attempt)
	}
	return l
}

// OpenVerifications counts the tenant's actions whose watch has not ended.
func (a *Activities) OpenVerifications(ctx context.Context, tenantID string) (int, error) {
	n, err := a.Store.CountWatchedActions(ctx, tenantID, a.now())
	if err != nil {
		return 0, fmt.Errorf("count open verifications of %s: %w", tenantID, err)
	}
	return n, nil
}

// EndWatchInput ends a cancelled verification's watch, so nothing nudges it.
type EndWatchInput struct {
	TenantID string
	ActionID string
}

// EndWatch records that the action is no longer watched.
func (a *Activities) EndWatch(ctx context.Context, in EndWatchInput) error {
	if err := a.Store.EndWatch(ctx, in.TenantID, in.ActionID, a.now()); err != nil && !errors.Is(err, commitlayer.ErrNotFound) {
		return fmt.Errorf("end watch of %s: %w", in.ActionID, err)
	}
	return nil
}
