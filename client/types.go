package client

import (
	"time"

	"github.com/commitlayer/commitlayer"
)

// Tenant is a tenant; APIKey is set only in CreateTenant's answer.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	APIKey    string    `json:"api_key,omitempty"`
}

// Contract is a stored contract version; Source is set by GetContract.
type Contract struct {
	ID        string    `json:"id"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	Source    string    `json:"source,omitempty"`
}

// FactsResult counts what POST /v1/facts stored.
type FactsResult struct {
	Inserted   int `json:"inserted"`
	Duplicates int `json:"duplicates"`
}

// ConnectorInput creates a connector.
type ConnectorInput struct {
	Source string `json:"source"`
	Kind   string `json:"kind"` // "http_events"
	URL    string `json:"url"`
}

// Connector is a tenant's connector for one source.
type Connector struct {
	ID          string     `json:"id"`
	Source      string     `json:"source"`
	Kind        string     `json:"kind"`
	URL         string     `json:"url"`
	Cursor      string     `json:"cursor"`
	LastPullAt  *time.Time `json:"last_pull_at"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

// Source is one source's coverage.
type Source struct {
	Source       string     `json:"source"`
	EverReported bool       `json:"ever_reported"`
	FactCount    int64      `json:"fact_count"`
	LastFactAt   *time.Time `json:"last_fact_at"`
	LastSeenAt   *time.Time `json:"last_seen_at"`
	ConnectorID  string     `json:"connector_id,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	LastErrorAt  *time.Time `json:"last_error_at"`
}

// Accepted is the answer to RecordAction.
type Accepted struct {
	ID         string `json:"id"`
	VerdictURL string `json:"verdict_url"`
	// Verdict is set when RecordOptions.Wait was given and the verdict got
	// to that stage within the wait.
	Verdict *commitlayer.Verdict `json:"verdict,omitempty"`
	// Replayed is true when the server answered an earlier request with the
	// same idempotency key (or action id): nothing new was started.
	Replayed bool `json:"-"`
}

// StoredAction is an action as the server keeps it.
type StoredAction struct {
	commitlayer.Action
	SettlesAt  time.Time `json:"settles_at"`
	WatchUntil time.Time `json:"watch_until"`
	CreatedAt  time.Time `json:"created_at"`
}

// ActionDetail is GET /v1/actions/{id}: the action, its current verdict
// (nil until the first exists) and every verdict, oldest first.
type ActionDetail struct {
	Action  StoredAction          `json:"action"`
	Verdict *commitlayer.Verdict  `json:"verdict"`
	History []commitlayer.Verdict `json:"history"`
}

// Orphan is an effect of a contract's kind that no recorded action
// accounts for.
type Orphan struct {
	ContractID string           `json:"contract_id"`
	Check      string           `json:"check"`
	Fact       commitlayer.Fact `json:"fact"`
}

// OrphanList is GET /v1/actions/orphans.
type OrphanList struct {
	Orphans []Orphan  `json:"orphans"`
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
}
