package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Connector pulls facts for one source of a tenant.
type Connector struct {
	ID, TenantID, Source, Kind, URL string
	Cursor                          string
	LastPullAt                      time.Time
	LastError                       string
	LastErrorAt                     time.Time
	CreatedAt                       time.Time
}

// SourceCoverage says what the store knows of one source of a tenant.
type SourceCoverage struct {
	Source       string
	EverReported bool
	FactCount    int64
	LastFactAt   time.Time
	LastSeenAt   time.Time // last ingestion
	ConnectorID  string
	LastError    string
	LastErrorAt  time.Time
}

// CreateConnector creates a connector; one per (tenant, source).
func (db *DB) CreateConnector(ctx context.Context, tenantID string, c Connector) (Connector, error) {
	return Connector{}, errors.ErrUnsupported
}

// ListConnectors lists a tenant's connectors.
func (db *DB) ListConnectors(ctx context.Context, tenantID string) ([]Connector, error) {
	return nil, errors.ErrUnsupported
}

// GetConnector returns one connector.
func (db *DB) GetConnector(ctx context.Context, tenantID, id string) (Connector, error) {
	return Connector{}, errors.ErrUnsupported
}

// RecordPull stores facts and advances the cursor in one transaction.
func (db *DB) RecordPull(ctx context.Context, tenantID, connectorID string, facts []commitlayer.Fact, cursor string, at time.Time) (InsertResult, error) {
	return InsertResult{}, errors.ErrUnsupported
}

// RecordPullError records a failed pull.
func (db *DB) RecordPullError(ctx context.Context, tenantID, connectorID string, msg string, at time.Time) error {
	return errors.ErrUnsupported
}

// Sources returns the coverage of every reported or connected source.
func (db *DB) Sources(ctx context.Context, tenantID string) ([]SourceCoverage, error) {
	return nil, errors.ErrUnsupported
}

// ConnectedSources returns the sources that ever reported a fact, sorted.
func (db *DB) ConnectedSources(ctx context.Context, tenantID string) ([]string, error) {
	return nil, errors.ErrUnsupported
}
