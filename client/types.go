package client

import (
	"encoding/json"
	"time"

	"github.com/commitlayer/commitlayer"
)

// The API's wire types, shared with package api. A test there holds them
// to api/openapi.json: a field without omitempty or omitzero is required.

// Tenant is a tenant; APIKey is set only in CreateTenant's answer.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	APIKey    string    `json:"api_key,omitempty"`
}

// TenantInput is the body of POST /v1/admin/tenants.
type TenantInput struct {
	Name string `json:"name"`
}

// TenantList is GET /v1/admin/tenants.
type TenantList struct {
	Tenants []Tenant `json:"tenants"`
}

// Contract is a stored contract version; Source (YAML or JSON, as posted)
// is set by GetContract.
type Contract struct {
	ID        string    `json:"id"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	Source    string    `json:"source,omitempty"`
}

// ContractList is GET /v1/contracts.
type ContractList struct {
	Contracts []Contract `json:"contracts"`
}

// FactBatch is the body of POST /v1/facts.
type FactBatch struct {
	Facts []commitlayer.Fact `json:"facts"`
}

// FactsResult counts what POST /v1/facts stored.
type FactsResult struct {
	Inserted   int `json:"inserted"`
	Duplicates int `json:"duplicates"`
}

// ConnectorInput creates a connector.
type ConnectorInput struct {
	Source string          `json:"source"`
	Kind   string          `json:"kind"` // http_events, stripe, postgres, http_json
	URL    string          `json:"url,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`  // the postgres and http_json kinds'
	APIKey string          `json:"api_key,omitempty"` // the stripe kind's; stored sealed, never answered
}

// Connector is a tenant's connector for one source.
type Connector struct {
	ID       string `json:"id"`
	Source   string `json:"source"`
	Kind     string `json:"kind"`
	URL      string `json:"url"`
	KeyLast4 string `json:"api_key_last4,omitempty"`
	// Config is as stored: credentials sealed apart, shown as last 4.
	Config      json.RawMessage `json:"config,omitempty"`
	Cursor      string          `json:"cursor"`
	LastPullAt  *time.Time      `json:"last_pull_at"`
	LastError   string          `json:"last_error,omitempty"`
	LastErrorAt *time.Time      `json:"last_error_at"`
	CreatedAt   time.Time       `json:"created_at"`
}

// ConnectorList is GET /v1/connectors.
type ConnectorList struct {
	Connectors []Connector `json:"connectors"`
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

// SourceList is GET /v1/sources: coverage, and spans POST /v1/traces rejected.
type SourceList struct {
	Sources        []Source        `json:"sources"`
	SpanRejections []SpanRejection `json:"span_rejections"`
}

// AttemptInput is the body of POST /v1/actions/{id}/attempts.
type AttemptInput struct {
	Claim commitlayer.Claim `json:"claim"`
	Trace json.RawMessage   `json:"trace,omitempty"` // one JSON object
	At    *time.Time        `json:"at,omitempty"`    // when it began (nil: now)
}

// SpanRejection is one span POST /v1/traces rejected, and why.
type SpanRejection struct {
	At      time.Time `json:"at"`
	TraceID string    `json:"trace_id"`
	SpanID  string    `json:"span_id"`
	Tool    string    `json:"tool"`
	Dialect string    `json:"dialect"`
	Message string    `json:"message"`
}

// ActionInput is the body of POST /v1/actions; zero optional fields take
// the server's defaults.
type ActionInput struct {
	ID              string             `json:"id,omitempty"`
	Contract        string             `json:"contract"`
	ContractVersion int                `json:"contract_version,omitzero"`
	Agent           string             `json:"agent"`
	Subject         string             `json:"subject"`
	Params          commitlayer.Attrs  `json:"params,omitempty"`
	RequestedAt     *time.Time         `json:"requested_at,omitempty"`
	Claim           *commitlayer.Claim `json:"claim,omitempty"`
	Trace           json.RawMessage    `json:"trace,omitempty"`
}

// Accepted is the answer to RecordAction.
type Accepted struct {
	ID         string `json:"id"`
	VerdictURL string `json:"verdict_url"`
	// Verification is started, pending (left to the server's reconciler) or
	// failed (Temporal refused it for good; VerificationError says why).
	Verification      string               `json:"verification"`
	VerificationError string               `json:"verification_error,omitempty"`
	Verdict           *commitlayer.Verdict `json:"verdict,omitempty"` // with RecordOptions.Wait
	Replayed          bool                 `json:"-"`                 // an earlier request's answer: nothing new started
}

// StoredAction is an action as the server keeps it.
type StoredAction struct {
	commitlayer.Action
	SettlesAt  time.Time `json:"settles_at"`
	WatchUntil time.Time `json:"watch_until"`
	CreatedAt  time.Time `json:"created_at"`
}

// ActionDetail is GET /v1/actions/{id}: the action, its current verdict
// (nil until the first) and every verdict, oldest first.
type ActionDetail struct {
	Action            StoredAction          `json:"action"`
	Verification      string                `json:"verification"`
	VerificationError string                `json:"verification_error,omitempty"`
	Verdict           *commitlayer.Verdict  `json:"verdict"`
	History           []commitlayer.Verdict `json:"history"`
}

// RecheckResult is the answer to POST /v1/actions/{id}/recheck.
type RecheckResult struct {
	Verdict commitlayer.Verdict `json:"verdict"`
}

// Orphan is an effect no recorded action accounts for.
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

// Health is GET /healthz; Ready is GET /readyz, "ok" or "unavailable"
// overall and for the database and Temporal.
type (
	Health struct {
		Status string `json:"status"`
	}
	Ready struct {
		Status   string `json:"status"`
		Database string `json:"database"`
		Temporal string `json:"temporal"`
	}
)

// ErrorBody is every error's body; ErrorDetail is one problem in an
// invalid_contract error.
type (
	ErrorBody struct {
		Error struct {
			Code    string        `json:"code"`
			Message string        `json:"message"`
			Details []ErrorDetail `json:"details,omitempty"`
		} `json:"error"`
	}
	ErrorDetail struct {
		Field   string `json:"field,omitempty"`
		Line    int    `json:"line,omitzero"`
		Message string `json:"message"`
	}
)
