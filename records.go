package commitlayer

import (
	"encoding/json"
	"time"
)

// The records below are what the postgres package stores and loads, so
// the other layers pass them around without depending on the store.

// Tenant is one customer workspace.
type Tenant struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// ActionRecord is a stored action (contract version pinned) and its verification's window.
type ActionRecord struct {
	Action
	TenantID   string
	SettlesAt  time.Time
	WatchUntil time.Time
	CreatedAt  time.Time
	// VerificationStartedAt is when its verification started (zero while
	// pending); VerificationFailedAt when Temporal refused its start for
	// good, with VerificationError why: it is not started again.
	VerificationStartedAt time.Time
	VerificationFailedAt  time.Time
	VerificationError     string
}

// Verification states of an action, as GET /v1/actions/{id} shows them.
const (
	VerificationPending = "pending"
	VerificationStarted = "started"
	VerificationFailed  = "failed"
)

// Verification says where the action's verification is: failed, started
// or pending (recorded, its start left to the reconciler).
func (r ActionRecord) Verification() string {
	switch {
	case !r.VerificationFailedAt.IsZero():
		return VerificationFailed
	case !r.VerificationStartedAt.IsZero():
		return VerificationStarted
	}
	return VerificationPending
}

// ContractRecord is one stored version of a contract.
type ContractRecord struct {
	ID        string
	Version   int
	Source    []byte // YAML or JSON as posted
	CreatedAt time.Time
}

// Connector pulls facts for one source of a tenant; Kind says how (http_events, …).
type Connector struct {
	ID, TenantID, Source string
	Kind                 string
	URL                  string
	// Config holds kind-specific settings (JSON); Secret is a sealed
	// credential, SecretHint what may be shown of it (its last 4).
	Config      json.RawMessage
	Secret      string
	SecretHint  string
	Cursor      string
	LastPullAt  time.Time // last successful pull
	LastError   string
	LastErrorAt time.Time
	CreatedAt   time.Time
}

// SourceCoverage says what the store knows of one source of a tenant.
type SourceCoverage struct {
	Source       string
	EverReported bool
	FactCount    int64
	LastFactAt   time.Time // latest occurred_at among its facts
	LastSeenAt   time.Time // last ingestion: a batch pushed or a successful pull
	ConnectorID  string
	LastError    string
	LastErrorAt  time.Time
}

// SpanRejection is a span of POST /v1/traces that looked like a bound tool
// call but became no action, and why (kept so a team sees it).
type SpanRejection struct {
	At              time.Time
	TraceID, SpanID string
	Tool, Dialect   string
	Message         string
}

// FactType names a kind of fact: a type from a source.
type FactType struct{ Source, Type string }

// InsertResult counts a batch of facts.
type InsertResult struct {
	Inserted, Duplicates int
	// Subjects are the inserted facts' distinct subjects and links, sorted:
	// whose open verifications should hear of them.
	Subjects []Subject
}

// FactPage is one pull of a connector.
type FactPage struct {
	Facts []Fact
	Next  string // the connector's cursor after this page
	More  bool   // the source has more after Next
}
