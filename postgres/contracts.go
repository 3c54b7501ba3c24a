package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/commitlayer/commitlayer"
	"github.com/jackc/pgx/v5"
)

// PutContract stores source as contractID's next version (from 1, created =
// true) unless it is the latest's, which is returned. Callers validate and
// compile it first; concurrent puts of one contract are serialized.
func (db *DB) PutContract(ctx context.Context, tenantID, contractID string, source []byte) (commitlayer.ContractRecord, bool, error) {
	if contractID == "" || len(source) == 0 {
		return commitlayer.ContractRecord{}, false, fmt.Errorf("put contract %q: %w: id and source are required", contractID, commitlayer.ErrInvalid)
	}
	var (
		rec     commitlayer.ContractRecord
		created bool
	)
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		created = false
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2 || '/' || $3))`,
			lockSpace+lockContracts, tenantID, contractID); err != nil {
			return err
		}
		latest, err := getContract(ctx, tx, tenantID, contractID, 0)
		switch {
		case err == nil && bytes.Equal(latest.Source, source):
			rec = latest
			return nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		rec = commitlayer.ContractRecord{ID: contractID, Version: latest.Version + 1, Source: bytes.Clone(source)}
		if err := tx.QueryRow(ctx, `INSERT INTO contracts (tenant_id, id, version, source)
			VALUES ($1, $2, $3, $4) RETURNING created_at`,
			tenantID, contractID, rec.Version, source).Scan(&rec.CreatedAt); err != nil {
			return classify(err)
		}
		rec.CreatedAt = rec.CreatedAt.UTC()
		created = true
		return nil
	})
	if err != nil {
		return commitlayer.ContractRecord{}, false, fmt.Errorf("put contract %q: %w", contractID, classify(err))
	}
	return rec, created, nil
}

// GetContract returns one version of a contract; version 0 means the latest.
func (db *DB) GetContract(ctx context.Context, tenantID, contractID string, version int) (commitlayer.ContractRecord, error) {
	rec, err := getContract(ctx, db.pool, tenantID, contractID, version)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.ContractRecord{}, fmt.Errorf("get contract %q version %d: %w", contractID, version, commitlayer.ErrNotFound)
	}
	if err != nil {
		return commitlayer.ContractRecord{}, fmt.Errorf("get contract %q version %d: %w", contractID, version, classify(err))
	}
	return rec, nil
}

// querier is what pgxpool.Pool, pgx.Conn and pgx.Tx have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// getContract returns pgx.ErrNoRows when there is no such version.
func getContract(ctx context.Context, q querier, tenantID, contractID string, version int) (commitlayer.ContractRecord, error) {
	rows, err := q.Query(ctx, `SELECT id, version, source, created_at FROM contracts
		WHERE tenant_id = $1 AND id = $2 AND ($3 = 0 OR version = $3)
		ORDER BY version DESC LIMIT 1`, tenantID, contractID, version)
	if err != nil {
		return commitlayer.ContractRecord{}, err
	}
	return pgx.CollectExactlyOneRow(rows, scanContract)
}

// ListContracts returns the latest version of each contract, by id.
func (db *DB) ListContracts(ctx context.Context, tenantID string) ([]commitlayer.ContractRecord, error) {
	return queryAll(ctx, db.pool, "list contracts", scanContract, `SELECT DISTINCT ON (id) id, version, source, created_at
		FROM contracts WHERE tenant_id = $1 ORDER BY id, version DESC`, tenantID)
}

func scanContract(row pgx.CollectableRow) (commitlayer.ContractRecord, error) {
	var r commitlayer.ContractRecord
	err := row.Scan(&r.ID, &r.Version, &r.Source, &r.CreatedAt)
	r.CreatedAt = r.CreatedAt.UTC()
	return r, err
}
