package postgres

import (
	"context"
	"errors"
	"time"
)

// Tenant is one customer workspace.
type Tenant struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// CreateTenant creates a tenant and its API key; the key is returned once
// and stored only as its SHA-256.
func (db *DB) CreateTenant(ctx context.Context, name string) (Tenant, string, error) {
	return Tenant{}, "", errors.ErrUnsupported
}

// ListTenants lists every tenant.
func (db *DB) ListTenants(ctx context.Context) ([]Tenant, error) { return nil, errors.ErrUnsupported }

// TenantByAPIKey returns the tenant owning key.
func (db *DB) TenantByAPIKey(ctx context.Context, key string) (Tenant, error) {
	return Tenant{}, errors.ErrUnsupported
}

// DeleteTenant purges every row of the tenant.
func (db *DB) DeleteTenant(ctx context.Context, tenantID string) error { return errors.ErrUnsupported }
