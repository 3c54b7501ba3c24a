package postgres

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/jackc/pgx/v5"
)

// apiKeyPrefix starts every tenant API key.
const apiKeyPrefix = "cl_"

// CreateTenant creates a tenant ("t_" + 16 base32 characters) and its API key
// ("cl_<8 characters of the id>_<32 random bytes in base32>"), returned once:
// only its SHA-256 is stored.
func (db *DB) CreateTenant(ctx context.Context, name string) (commitlayer.Tenant, string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return commitlayer.Tenant{}, "", fmt.Errorf("create tenant: %w: name is required", commitlayer.ErrInvalid)
	}
	id := commitlayer.NewID("t_")
	key := apiKeyPrefix + strings.TrimPrefix(id, "t_")[:8] + "_" + randomToken(32)
	hash := sha256.Sum256([]byte(key))
	t := commitlayer.Tenant{ID: id, Name: name}
	err := db.pool.QueryRow(ctx,
		`INSERT INTO tenants (id, name, api_key_hash) VALUES ($1, $2, $3) RETURNING created_at`,
		id, name, hash[:]).Scan(&t.CreatedAt)
	if err != nil {
		return commitlayer.Tenant{}, "", fmt.Errorf("create tenant: %w", classify(err))
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return t, key, nil
}

// ListTenants lists every tenant, oldest first.
func (db *DB) ListTenants(ctx context.Context) ([]commitlayer.Tenant, error) {
	return queryAll(ctx, db.pool, "list tenants", scanTenant, `SELECT id, name, created_at FROM tenants ORDER BY created_at, id`)
}

// TenantByAPIKey returns the tenant owning key, commitlayer.ErrNotFound for an
// unknown key. Lookup by SHA-256 leaks nothing useful through timing.
func (db *DB) TenantByAPIKey(ctx context.Context, key string) (commitlayer.Tenant, error) {
	if !strings.HasPrefix(key, apiKeyPrefix) {
		return commitlayer.Tenant{}, fmt.Errorf("tenant by api key: %w", commitlayer.ErrNotFound)
	}
	t, _, err := db.TenantByAPIKeyLimited(ctx, key, "", 0, time.Time{})
	return t, err
}

// TenantByAPIKeyLimited is TenantByAPIKey that also says, in the same round
// trip, until when limitKey has max or more hits (Hit) in its window (zero when
// fewer), whether or not the key is right.
func (db *DB) TenantByAPIKeyLimited(ctx context.Context, key, limitKey string, max int, now time.Time) (commitlayer.Tenant, time.Time, error) {
	hash := sha256.Sum256([]byte(key))
	var (
		id, name         *string
		created, blocked *time.Time
		err              error
	)
	// A connection the server killed (restart, failover) fails its first use;
	// the pool drops it, and a second try gets a live one.
	for attempt := 0; attempt < 2; attempt++ {
		err = db.pool.QueryRow(ctx, `SELECT t.id, t.name, t.created_at,
				(SELECT l.until FROM rate_limits l WHERE l.key = $2 AND l.until > $3 AND l.n >= $4)
			FROM (SELECT 1) one LEFT JOIN tenants t ON t.api_key_hash = $1`, hash[:], limitKey, now, max).
			Scan(&id, &name, &created, &blocked)
		if err == nil || !isUnavailable(err) || ctx.Err() != nil {
			break
		}
	}
	var until time.Time
	if blocked != nil {
		until = *blocked
	}
	switch {
	case err != nil:
		return commitlayer.Tenant{}, until, fmt.Errorf("tenant by api key: %w", classify(err))
	case id == nil:
		return commitlayer.Tenant{}, until, fmt.Errorf("tenant by api key: %w", commitlayer.ErrNotFound)
	}
	return commitlayer.Tenant{ID: *id, Name: *name, CreatedAt: created.UTC()}, until, nil
}

// DeleteTenant purges the tenant and every row it owns: facts through a trigger
// on tenants (migration 0013), the rest through ON DELETE CASCADE.
func (db *DB) DeleteTenant(ctx context.Context, tenantID string) error {
	tag, err := db.pool.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, tenantID)
	if err != nil {
		return fmt.Errorf("delete tenant %q: %w", tenantID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete tenant %q: %w", tenantID, commitlayer.ErrNotFound)
	}
	return nil
}

func scanTenant(row pgx.CollectableRow) (commitlayer.Tenant, error) {
	var t commitlayer.Tenant
	err := row.Scan(&t.ID, &t.Name, &t.CreatedAt)
	t.CreatedAt = t.CreatedAt.UTC()
	return t, err
}
