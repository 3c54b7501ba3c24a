package postgres

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// Console sessions (migration 0016) are kept by the SHA-256 of their token,
// shared by every API process on the database.

// CreateSession stores a session of tenantID under token, started at now, that
// ends at idleUntil unless used again (Session) and at endsAt however used.
// Past perTenant sessions the tenant's own oldest end; expired ones are deleted.
func (db *DB) CreateSession(ctx context.Context, tenantID, token string, now, idleUntil, endsAt time.Time, perTenant int) error {
	h := sha256.Sum256([]byte(token))
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO console_sessions (id_hash, tenant_id, created_at, ends_at, expires_at)
			VALUES ($1, $2, $3, $4::timestamptz, least($5::timestamptz, $4::timestamptz))`, h[:], tenantID, now, endsAt, idleUntil); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE id_hash IN (
			SELECT id_hash FROM console_sessions WHERE tenant_id = $1 ORDER BY created_at DESC, id_hash OFFSET $2)`,
			tenantID, perTenant); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE expires_at <= $1`, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("create session: %w", classify(err))
	}
	return nil
}

// Session returns the tenant of the session of token live at now and
// extends it to idleUntil (never past its end); commitlayer.ErrNotFound
// when there is none or it ended.
func (db *DB) Session(ctx context.Context, token string, now, idleUntil time.Time) (commitlayer.Tenant, error) {
	h := sha256.Sum256([]byte(token))
	return queryOne(ctx, db.pool, "session", scanTenant, `UPDATE console_sessions s
		SET expires_at = least($3::timestamptz, s.ends_at)
		FROM tenants t WHERE s.id_hash = $1 AND s.expires_at > $2 AND t.id = s.tenant_id
		RETURNING t.id, t.name, t.created_at`, h[:], now, idleUntil)
}

// DeleteSession ends the session of token, for every process.
func (db *DB) DeleteSession(ctx context.Context, token string) error {
	h := sha256.Sum256([]byte(token))
	if _, err := db.pool.Exec(ctx, `DELETE FROM console_sessions WHERE id_hash = $1`, h[:]); err != nil {
		return fmt.Errorf("delete session: %w", classify(err))
	}
	return nil
}

// Hit counts one event under key in its window (started by its first event)
// and returns the count and the window's end. One statement, so concurrent hits
// get distinct counts and a burst cannot slip past a limit. A hit that opens a
// window deletes the windows that ended.
func (db *DB) Hit(ctx context.Context, key string, window time.Duration, now time.Time) (int, time.Time, error) {
	var (
		n     int
		until time.Time
	)
	err := db.pool.QueryRow(ctx, `INSERT INTO rate_limits AS l (key, n, until) VALUES ($1, 1, $3)
		ON CONFLICT (key) DO UPDATE SET
			n = CASE WHEN l.until <= $2 THEN 1 ELSE l.n + 1 END,
			until = CASE WHEN l.until <= $2 THEN EXCLUDED.until ELSE l.until END
		RETURNING n, until`, key, now, now.Add(window)).Scan(&n, &until)
	if err == nil && n == 1 {
		_, err = db.pool.Exec(ctx, `DELETE FROM rate_limits WHERE until <= $1`, now)
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("rate limit: %w", classify(err))
	}
	return n, until, nil
}

// Unhit takes back one hit of key's window that ends at until (a login
// whose key was right: only wrong ones count).
func (db *DB) Unhit(ctx context.Context, key string, until time.Time) error {
	if _, err := db.pool.Exec(ctx, `UPDATE rate_limits SET n = n - 1 WHERE key = $1 AND until = $2 AND n > 0`, key, until); err != nil {
		return fmt.Errorf("rate limit: %w", classify(err))
	}
	return nil
}
