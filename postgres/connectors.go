package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/jackc/pgx/v5"
)

const connectorColumns = `id, tenant_id, source, kind, url, cursor, last_pull_at, last_error, last_error_at, created_at,
	config, secret, secret_hint`

// CreateConnector creates the (tenant, source)'s one connector: a second, or a
// taken client-given id, is commitlayer.ErrConflict. An empty c.ID gets
// "conn_" + random; c.TenantID is ignored.
func (db *DB) CreateConnector(ctx context.Context, tenantID string, c commitlayer.Connector) (commitlayer.Connector, error) {
	if !commitlayer.ValidName(c.Source) || c.Kind == "" {
		return commitlayer.Connector{}, fmt.Errorf("create connector for %q: %w: a source name and a kind are required", c.Source, commitlayer.ErrInvalid)
	}
	if c.ID == "" {
		c.ID = commitlayer.NewID("conn_")
	}
	config := []byte(c.Config)
	if len(config) == 0 {
		config = []byte("{}")
	}
	rows, err := db.pool.Query(ctx, `INSERT INTO connectors (tenant_id, id, source, kind, url, cursor, config, secret, secret_hint)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT DO NOTHING
		RETURNING `+connectorColumns, tenantID, c.ID, c.Source, c.Kind, c.URL, c.Cursor, config, c.Secret, c.SecretHint)
	if err != nil {
		return commitlayer.Connector{}, fmt.Errorf("create connector for %q: %w", c.Source, classify(err))
	}
	out, err := pgx.CollectExactlyOneRow(rows, scanConnector)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.Connector{}, fmt.Errorf("create connector for %q: %w: the source or id already has one", c.Source, commitlayer.ErrConflict)
	}
	if err != nil {
		return commitlayer.Connector{}, fmt.Errorf("create connector for %q: %w", c.Source, classify(err))
	}
	return out, nil
}

// DeleteConnector deletes a connector; its source's facts and coverage stay.
func (db *DB) DeleteConnector(ctx context.Context, tenantID, id string) error {
	tag, err := db.pool.Exec(ctx, `DELETE FROM connectors WHERE tenant_id = $1 AND id = $2`, tenantID, id)
	if err != nil {
		return fmt.Errorf("delete connector %q: %w", id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete connector %q: %w", id, commitlayer.ErrNotFound)
	}
	return nil
}

// ListConnectors lists a tenant's connectors by source.
func (db *DB) ListConnectors(ctx context.Context, tenantID string) ([]commitlayer.Connector, error) {
	return queryAll(ctx, db.pool, "list connectors", scanConnector, `SELECT `+connectorColumns+` FROM connectors WHERE tenant_id = $1 ORDER BY source`, tenantID)
}

// GetConnector returns one connector, commitlayer.ErrNotFound if none.
func (db *DB) GetConnector(ctx context.Context, tenantID, id string) (commitlayer.Connector, error) {
	c, err := getConnector(ctx, db.pool, tenantID, id, false)
	if err != nil {
		return commitlayer.Connector{}, fmt.Errorf("get connector %q: %w", id, classify(err))
	}
	return c, nil
}

func getConnector(ctx context.Context, q querier, tenantID, id string, forUpdate bool) (commitlayer.Connector, error) {
	sql := `SELECT ` + connectorColumns + ` FROM connectors WHERE tenant_id = $1 AND id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, tenantID, id)
	if err != nil {
		return commitlayer.Connector{}, err
	}
	c, err := pgx.CollectExactlyOneRow(rows, scanConnector)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.Connector{}, commitlayer.ErrNotFound
	}
	return c, err
}

// PulledPage is one page a pull read from one connector (RecordPulls).
type PulledPage struct {
	ConnectorID string
	Facts       []commitlayer.Fact
	Cursor      string // the connector's cursor after the page (FactPage.Next)
}

// RecordPulls stores pages of a tenant's connectors (each at most once) in one
// transaction: the facts, each cursor moved only with its facts, last errors
// cleared, last pulls set to at, and one notice except to exceptActionID. All
// or nothing: an unknown connector is commitlayer.ErrNotFound, a fact of
// another source ErrInvalid. Connectors are locked in id order, so two such
// transactions never wait in a cycle.
func (db *DB) RecordPulls(ctx context.Context, tenantID, exceptActionID string, pages []PulledPage, at time.Time) (commitlayer.InsertResult, error) {
	if err := checkTimes("at", at); err != nil {
		return commitlayer.InsertResult{}, fmt.Errorf("record pulls: %w", classify(err))
	}
	for i, p := range pages {
		for _, q := range pages[:i] {
			if q.ConnectorID == p.ConnectorID {
				return commitlayer.InsertResult{}, fmt.Errorf("record pulls: %w: connector %q given twice", commitlayer.ErrInvalid, p.ConnectorID)
			}
		}
	}
	if len(pages) == 0 {
		return commitlayer.InsertResult{}, nil
	}
	res, err := db.recordPages(ctx, tenantID, exceptActionID, pages, at)
	if err != nil {
		return commitlayer.InsertResult{}, fmt.Errorf("record pulls: %w", err)
	}
	return res, nil
}

// recordPages is RecordPulls' transaction; its errors are classified.
func (db *DB) recordPages(ctx context.Context, tenantID, except string, pages []PulledPage, at time.Time) (commitlayer.InsertResult, error) {
	ids, cursors := make([]string, len(pages)), make([]string, len(pages))
	var all []commitlayer.Fact
	for i, p := range pages {
		ids[i], cursors[i] = p.ConnectorID, p.Cursor
		all = append(all, p.Facts...)
	}
	rows, err := encodeFacts(all, 0)
	if err != nil {
		return commitlayer.InsertResult{}, classify(err)
	}
	var res commitlayer.InsertResult
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		lrows, err := tx.Query(ctx, `SELECT id, source FROM connectors
			WHERE tenant_id = $1 AND id = ANY($2) ORDER BY id FOR UPDATE`, tenantID, ids)
		if err != nil {
			return err
		}
		sources := map[string]string{}
		var id, source string
		if _, err := pgx.ForEachRow(lrows, []any{&id, &source}, func() error {
			sources[id] = source
			return nil
		}); err != nil {
			return err
		}
		for _, p := range pages {
			src, ok := sources[p.ConnectorID]
			if !ok {
				return fmt.Errorf("connector %q: %w", p.ConnectorID, commitlayer.ErrNotFound)
			}
			for j := range p.Facts {
				if p.Facts[j].Source != src {
					return fmt.Errorf("%w: connector %q: facts[%d]: source %q is not the connector's %q",
						commitlayer.ErrInvalid, p.ConnectorID, j, p.Facts[j].Source, src)
				}
			}
		}
		if res, err = db.insertFacts(ctx, tx, tenantID, rows); err != nil {
			return err
		}
		if err := enqueueNotice(ctx, tx, tenantID, res.Subjects, except, contracts.DigestFacts(all)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE connectors k SET cursor = p.cursor, last_pull_at = $2, last_error = '', last_error_at = NULL
			FROM unnest($3::text[], $4::text[]) AS p(id, cursor)
			WHERE k.tenant_id = $1 AND k.id = p.id`, tenantID, at, ids, cursors)
		return err
	})
	if err != nil {
		return commitlayer.InsertResult{}, classify(err)
	}
	res.Duplicates = len(all) - res.Inserted
	return res, nil
}

// RecordEmptyPulls records in one statement that the connectors, read from
// cursors[i], found nothing new: last pull set to at, last error cleared. It
// returns those not updated: unknown, cursor moved, or a later pull or error
// already recorded (these records may land after the next pull's).
func (db *DB) RecordEmptyPulls(ctx context.Context, tenantID string, connectorIDs, cursors []string, at time.Time) ([]string, error) {
	if len(connectorIDs) != len(cursors) {
		return nil, fmt.Errorf("record empty pulls: %w: %d connector ids for %d cursors", commitlayer.ErrInvalid, len(connectorIDs), len(cursors))
	}
	if err := checkTimes("at", at); err != nil {
		return nil, fmt.Errorf("record empty pulls: %w", classify(err))
	}
	if len(connectorIDs) == 0 {
		return nil, nil
	}
	rows, err := db.pool.Query(ctx, `UPDATE connectors k SET last_pull_at = $2, last_error = '', last_error_at = NULL
		FROM unnest($3::text[], $4::text[]) AS p(id, cursor)
		WHERE k.tenant_id = $1 AND k.id = p.id AND k.cursor = p.cursor
			AND (k.last_pull_at IS NULL OR k.last_pull_at <= $2)
			AND (k.last_error_at IS NULL OR k.last_error_at <= $2)
		RETURNING k.id`, tenantID, at, connectorIDs, cursors)
	if err != nil {
		return nil, fmt.Errorf("record empty pulls: %w", classify(err))
	}
	updated, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("record empty pulls: %w", classify(err))
	}
	var missed []string
	for _, id := range connectorIDs {
		if !slices.Contains(updated, id) {
			missed = append(missed, id)
		}
	}
	return missed, nil
}

// RecordPullError records that a pull failed at at; cursor and last pull stay.
func (db *DB) RecordPullError(ctx context.Context, tenantID, connectorID string, msg string, at time.Time) error {
	if err := checkTimes("at", at); err != nil {
		return fmt.Errorf("record pull error of %q: %w", connectorID, classify(err))
	}
	tag, err := db.pool.Exec(ctx, `UPDATE connectors SET last_error = $3, last_error_at = $4
		WHERE tenant_id = $1 AND id = $2`, tenantID, connectorID, msg, at)
	if err != nil {
		return fmt.Errorf("record pull error of %q: %w", connectorID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record pull error of %q: %w", connectorID, commitlayer.ErrNotFound)
	}
	return nil
}

// Sources returns the coverage of every source that sent facts or has a
// connector, by source name.
func (db *DB) Sources(ctx context.Context, tenantID string) ([]commitlayer.SourceCoverage, error) {
	return queryAll(ctx, db.pool, "sources", func(row pgx.CollectableRow) (commitlayer.SourceCoverage, error) {
		var (
			s                          commitlayer.SourceCoverage
			lastFact, lastSeen, lastEr *time.Time
		)
		err := row.Scan(&s.Source, &s.FactCount, &lastFact, &lastSeen, &s.ConnectorID, &s.LastError, &lastEr)
		s.EverReported = s.FactCount > 0
		s.LastFactAt, s.LastSeenAt, s.LastErrorAt = timeOrZero(lastFact), timeOrZero(lastSeen), timeOrZero(lastEr)
		return s, err
	}, `SELECT coalesce(c.source, k.source), coalesce(c.fact_count, 0), c.last_fact_at,
			greatest(c.last_seen_at, k.last_pull_at), -- greatest ignores NULLs
			coalesce(k.id, ''), coalesce(k.last_error, ''), k.last_error_at
		FROM (SELECT * FROM source_coverage WHERE tenant_id = $1) c
		FULL JOIN (SELECT * FROM connectors WHERE tenant_id = $1) k ON c.source = k.source
		ORDER BY 1`, tenantID)
}

const connectedSourcesSQL = `SELECT source FROM source_coverage WHERE tenant_id = $1 AND fact_count > 0
		ORDER BY source`

// ConnectedSources returns the sources that ever reported a fact, sorted.
func (db *DB) ConnectedSources(ctx context.Context, tenantID string) ([]string, error) {
	return queryAll(ctx, db.pool, "connected sources", pgx.RowTo[string], connectedSourcesSQL, tenantID)
}

func scanConnector(row pgx.CollectableRow) (commitlayer.Connector, error) {
	var (
		c                   commitlayer.Connector
		lastPull, lastError *time.Time
	)
	var config []byte
	err := row.Scan(&c.ID, &c.TenantID, &c.Source, &c.Kind, &c.URL, &c.Cursor, &lastPull, &c.LastError, &lastError, &c.CreatedAt,
		&config, &c.Secret, &c.SecretHint)
	c.Config = config
	c.LastPullAt, c.LastErrorAt = timeOrZero(lastPull), timeOrZero(lastError)
	c.CreatedAt = c.CreatedAt.UTC()
	return c, err
}
