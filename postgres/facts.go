package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// InsertFacts stores a batch whole or not at all. A fact whose (source,
// external_id) is already stored for the tenant, or appears earlier in the
// same batch, is a duplicate and is skipped (the first one wins). Each
// stored fact gets the next sequence number, in batch order. The coverage
// of each source in the batch is updated in the same transaction.
//
// An invalid fact fails the whole batch with an error wrapping commitlayer.ErrInvalid
// (and a *commitlayer.FieldError when Validate caught it); an unknown tenant
// gives commitlayer.ErrNotFound.
func (db *DB) InsertFacts(ctx context.Context, tenantID string, facts []commitlayer.Fact) (commitlayer.InsertResult, error) {
	rows, err := encodeFacts(facts, 0)
	if err != nil {
		return commitlayer.InsertResult{}, fmt.Errorf("insert facts: %w", classify(err))
	}
	var res commitlayer.InsertResult
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if res, err = db.insertFacts(ctx, tx, tenantID, rows); err != nil {
			return err
		}
		// Of the batch as given: the inserted facts and perhaps more, so a
		// deliverer reading it may wake more than it must, never fewer.
		return enqueueNotice(ctx, tx, tenantID, res.Subjects, "", contracts.DigestFacts(facts))
	})
	if err != nil {
		return commitlayer.InsertResult{}, fmt.Errorf("insert facts: %w", classify(err))
	}
	res.Duplicates = len(facts) - res.Inserted
	return res, nil
}

// factRow is a validated fact, encoded for COPY.
type factRow struct {
	seq                              int64 // drawn by numberFacts
	source, typ, subject, externalID string
	occurredAt                       time.Time
	attrs                            []byte // JSON
	links                            []string
}

// encodeFacts validates the batch and drops in-batch duplicates. An error
// wraps commitlayer.ErrInvalid and names the fact by its index, counted
// from first.
func encodeFacts(facts []commitlayer.Fact, first int) ([]factRow, error) {
	type key struct{ source, externalID string }
	seen := make(map[key]bool, len(facts))
	rows := make([]factRow, 0, len(facts))
	for i := range facts {
		f := &facts[i]
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("%w: facts[%d]: %w", commitlayer.ErrInvalid, first+i, classify(err))
		}
		if err := checkTime("occurred_at", f.OccurredAt); err != nil {
			return nil, fmt.Errorf("facts[%d]: %w", first+i, classify(err))
		}
		k := key{f.Source, f.ExternalID}
		if seen[k] {
			continue
		}
		seen[k] = true
		attrs := []byte("{}")
		if len(f.Attrs) > 0 {
			var err error
			if attrs, err = json.Marshal(f.Attrs); err != nil {
				return nil, fmt.Errorf("%w: facts[%d].attrs: %w", commitlayer.ErrInvalid, first+i, err)
			}
		}
		var links []string
		for _, l := range f.Links {
			links = append(links, string(l))
		}
		rows = append(rows, factRow{source: f.Source, typ: f.Type, subject: string(f.Subject),
			externalID: f.ExternalID, occurredAt: f.OccurredAt, attrs: attrs, links: links})
	}
	return rows, nil
}

// insertFacts stores the rows, skipping those already stored, and updates
// source coverage. It sets Inserted and Subjects; the caller knows the
// batch size and sets Duplicates.
//
// Each fact gets the next sequence number in batch order, then the rows go
// in in key order (source, external_id): two batches sharing a fact wait
// for each other's in the same order, never in a cycle (a deadlock, which
// inTx retries only so often). A batch of facts none of which is stored yet
// (the common one) goes in by COPY straight into facts (copyNewFacts),
// under a savepoint: no staging, and no speculative insertion, which costs
// every row a search of the unique index before its insert and a WAL
// record after it (~20 % of PostgreSQL's CPU per fact, docs/benchmarks.md).
// A batch that holds a fact already stored, or being stored by a
// concurrent batch, hits the unique constraint: back to the savepoint, and
// in again through the staging table with ON CONFLICT DO NOTHING
// (stageFacts), which skips the duplicates. That costs the batch up to
// twice its insert, so for metStoredWindow after it the tenant's batches
// are staged straight away (a source that re-sends what it sent pays the
// double once a window). Any other error (a deadlock for inTx to retry, a
// check) ends the transaction.
func (db *DB) insertFacts(ctx context.Context, tx pgx.Tx, tenantID string, rows []factRow) (commitlayer.InsertResult, error) {
	if len(rows) == 0 {
		return commitlayer.InsertResult{}, nil
	}
	if err := lockTenant(ctx, tx, tenantID); err != nil {
		return commitlayer.InsertResult{}, err
	}
	rows, err := numberFacts(ctx, tx, rows)
	if err != nil {
		return commitlayer.InsertResult{}, classify(err)
	}
	now := time.Now()
	if at, ok := db.metStored.Load(tenantID); !ok || now.Sub(at.(time.Time)) > metStoredWindow {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return commitlayer.InsertResult{}, classify(err)
		}
		res, err := copyNewFacts(ctx, sp, tenantID, rows)
		if err == nil {
			if err = sp.Commit(ctx); err != nil {
				return commitlayer.InsertResult{}, classify(err)
			}
			db.newBatches.Add(1)
			if ok {
				db.metStored.CompareAndDelete(tenantID, at)
			}
			return res, nil
		}
		if rerr := sp.Rollback(ctx); rerr != nil || !isFactKeyViolation(err) {
			return commitlayer.InsertResult{}, classify(err)
		}
		db.metStored.Store(tenantID, now)
		db.retriedBatches.Add(1)
	}
	db.conflictBatches.Add(1)
	return stageFacts(ctx, tx, tenantID, rows)
}

// metStoredWindow is how long a tenant's batches are staged straight away
// after one of them met a stored fact.
const metStoredWindow = time.Minute

// factKeyConstraint is the unique constraint on a fact's (tenant, source,
// external_id) (migration 0001).
const factKeyConstraint = "facts_tenant_id_source_external_id_key"

// isFactKeyViolation reports whether err is a unique violation of a fact's
// key: a duplicate of a stored fact.
func isFactKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == factKeyConstraint
}

// numberFacts gives each row the next sequence number in batch order and
// returns them in key order (rows keeps its order: a transaction retried
// numbers them again).
func numberFacts(ctx context.Context, tx pgx.Tx, rows []factRow) ([]factRow, error) {
	seqs, err := tx.Query(ctx, `SELECT nextval('facts_seq_seq') FROM generate_series(1, $1)`, len(rows))
	if err != nil {
		return nil, err
	}
	numbered, seq := slices.Clone(rows), int64(0)
	i := 0
	if _, err := pgx.ForEachRow(seqs, []any{&seq}, func() error {
		numbered[i].seq = seq
		i++
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(numbered, func(a, b factRow) int {
		return cmp.Or(strings.Compare(a.source, b.source), strings.Compare(a.externalID, b.externalID))
	})
	return numbered, nil
}

// The staging table of a batch that repeats stored facts: each connection
// has its own (a temporary table made when it connects, createFactsIn),
// emptied when the transaction ends, so batches make no catalog churn. The
// store therefore needs session connections (no transaction-pooling proxy)
// and the TEMPORARY privilege (every role has it by default).
const (
	factsIn          = "facts_in"
	createFactsInSQL = `CREATE TEMP TABLE IF NOT EXISTS ` + factsIn + ` (seq bigint, tenant_id text, source text, type text,
		subject text, external_id text, occurred_at timestamptz, attrs jsonb, links text[], link_keys text[]) ON COMMIT DELETE ROWS`
)

// createFactsIn makes a new connection's staging table.
func createFactsIn(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, createFactsInSQL)
	return err
}

// factColumnsIn are the columns COPY writes, into facts and into the
// staging table alike.
var factColumnsIn = []string{"seq", "tenant_id", "source", "type", "subject", "external_id", "occurred_at", "attrs", "links", "link_keys"}

// copyFacts writes rows with COPY into table, each with its link keys
// (each link prefixed with the tenant, as facts.link_keys holds them).
func copyFacts(ctx context.Context, tx pgx.Tx, table, tenantID string, rows []factRow) error {
	var (
		vals   [10]any
		tenant any = tenantID // boxed once, not per row
		none   any = []string{}
	)
	_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, factColumnsIn, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := &rows[i]
		links, keys := none, none
		if len(r.links) > 0 {
			links, keys = r.links, linkKeys(tenantID, r.links)
		}
		vals = [10]any{r.seq, tenant, r.source, r.typ, r.subject, r.externalID, r.occurredAt, r.attrs, links, keys}
		return vals[:], nil
	}))
	return err
}

// copyNewFacts stores numbered rows none of which is stored yet, by COPY
// into facts, and updates coverage per source, in source order. A stored
// fact fails it with a unique violation of factKeyConstraint.
func copyNewFacts(ctx context.Context, tx pgx.Tx, tenantID string, rows []factRow) (commitlayer.InsertResult, error) {
	if err := copyFacts(ctx, tx, "facts", tenantID, rows); err != nil {
		return commitlayer.InsertResult{}, err
	}
	var (
		sources, subjects []string
		counts            []int64
		lasts             []time.Time
	)
	for _, r := range rows { // in source order
		if n := len(sources) - 1; n >= 0 && sources[n] == r.source {
			counts[n]++
			if r.occurredAt.After(lasts[n]) {
				lasts[n] = r.occurredAt
			}
		} else {
			sources, counts, lasts = append(sources, r.source), append(counts, 1), append(lasts, r.occurredAt)
		}
		subjects = append(append(subjects, r.subject), r.links...)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO source_coverage AS c (tenant_id, source, fact_count, last_fact_at, last_seen_at)
		SELECT $1, s, n, last, now() FROM unnest($2::text[], $3::bigint[], $4::timestamptz[]) AS u(s, n, last)
		ON CONFLICT (tenant_id, source) DO UPDATE SET `+coverageUpdate, tenantID, sources, counts, lasts); err != nil {
		return commitlayer.InsertResult{}, err
	}
	slices.Sort(subjects)
	res := commitlayer.InsertResult{Inserted: len(rows)}
	for _, s := range slices.Compact(subjects) {
		res.Subjects = append(res.Subjects, commitlayer.Subject(s))
	}
	return res, nil
}

// coverageUpdate adds a batch to a source's coverage row.
const coverageUpdate = `fact_count = c.fact_count + excluded.fact_count,
		last_fact_at = greatest(c.last_fact_at, excluded.last_fact_at),
		last_seen_at = excluded.last_seen_at`

// stageFacts stores the numbered rows not stored yet through the staging
// table, and updates the coverage of every source of the batch, in source
// order; it reads each inserted fact's subject and links.
func stageFacts(ctx context.Context, tx pgx.Tx, tenantID string, rows []factRow) (commitlayer.InsertResult, error) {
	if err := copyFacts(ctx, tx, factsIn, tenantID, rows); err != nil {
		return commitlayer.InsertResult{}, classify(err)
	}
	qrows, err := tx.Query(ctx, `WITH ins AS (
			INSERT INTO facts (`+strings.Join(factColumnsIn, ", ")+`)
			SELECT * FROM `+factsIn+` ORDER BY source, external_id
			ON CONFLICT (tenant_id, source, external_id) DO NOTHING
			RETURNING source, subject, links, occurred_at
		), cov AS (
			INSERT INTO source_coverage AS c (tenant_id, source, fact_count, last_fact_at, last_seen_at)
			SELECT $1, b.source, coalesce(i.n, 0), i.last, now()
			FROM (SELECT DISTINCT source FROM `+factsIn+`) b
			LEFT JOIN (SELECT source, count(*) AS n, max(occurred_at) AS last FROM ins GROUP BY source) i
				USING (source)
			ORDER BY b.source
			ON CONFLICT (tenant_id, source) DO UPDATE SET `+coverageUpdate+`
		)
		SELECT subject, links FROM ins`, tenantID)
	if err != nil {
		return commitlayer.InsertResult{}, classify(err)
	}
	var (
		res      commitlayer.InsertResult
		seen     = map[commitlayer.Subject]bool{}
		subject  string
		outLinks []string
	)
	_, err = pgx.ForEachRow(qrows, []any{&subject, &outLinks}, func() error {
		res.Inserted++
		seen[commitlayer.Subject(subject)] = true
		for _, l := range outLinks {
			seen[commitlayer.Subject(l)] = true
		}
		return nil
	})
	if err != nil {
		return commitlayer.InsertResult{}, classify(err)
	}
	for s := range seen {
		res.Subjects = append(res.Subjects, s)
	}
	slices.Sort(res.Subjects)
	return res, nil
}

// lockTenant checks that the tenant exists and keeps it until tx ends:
// facts has no foreign key to tenants (its RI check, one per row, was
// 10–20 % of ingest's Postgres CPU; migration 0013), so a batch checks its
// tenant once, taking the lock an RI check takes. A DeleteTenant running
// now makes this wait and then report commitlayer.ErrNotFound; one starting
// later waits for tx and then deletes the facts tx stored. (The coverage
// and outbox rows' foreign keys take the same lock, but only when a row is
// inserted: a batch that updates its source's coverage row takes none.)
func lockTenant(ctx context.Context, tx pgx.Tx, tenantID string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR KEY SHARE`, tenantID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("tenant %q: %w", tenantID, commitlayer.ErrNotFound)
	}
	return err
}

const factColumns = `seq, source, type, subject, external_id, occurred_at, attrs, links`

// factsAboutSQL is FactsAbout's query ($1 tenant, $2 subjects, $3 their
// link keys). d: the linked facts on the subjects or linking them (one on
// them that links nothing names no other subject, so d leaves it out and
// reads none of them). The result: the facts linking the subjects, plus
// the facts on the subjects and on every subject d mentions (its
// subjects and links).
const factsAboutSQL = `WITH d AS (
			SELECT subject, links FROM facts
			WHERE tenant_id = $1 AND link_keys <> '{}'::text[] AND (subject = ANY($2::text[]) OR link_keys && $3::text[])
		)
		SELECT ` + factColumns + ` FROM facts
		WHERE tenant_id = $1 AND (
			(link_keys <> '{}'::text[] AND link_keys && $3::text[])
			OR subject = ANY(ARRAY(SELECT subject FROM d UNION SELECT unnest(links) FROM d
				UNION SELECT unnest($2::text[]))))
		ORDER BY occurred_at, seq`

// FactsAbout returns the full history, ordered by occurred_at then seq, of:
// the facts on any of subjects; the facts that link any of them; and the
// facts on every subject one link hop away from those facts (a fact on
// order:o1 that links customer:c1 brings in the facts on customer:c1, and a
// ticket fact that links order:o1 brings in the ticket's other facts). It
// goes no further: facts that merely link a one-hop subject are left out.
func (db *DB) FactsAbout(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Fact, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	subs := make([]string, len(subjects))
	for i, s := range subjects {
		subs[i] = string(s)
	}
	rows, err := db.pool.Query(ctx, factsAboutSQL, tenantID, subs, linkKeys(tenantID, subs))
	if err != nil {
		return nil, fmt.Errorf("facts about %v: %w", subjects, classify(err))
	}
	facts, err := pgx.CollectRows(rows, scanFact)
	if err != nil {
		return nil, fmt.Errorf("facts about %v: %w", subjects, classify(err))
	}
	return facts, nil
}

// FactsOfKinds returns the facts of the given kinds that occurred in [from,
// to], ordered by occurred_at then seq. A zero from or to leaves that end
// open.
func (db *DB) FactsOfKinds(ctx context.Context, tenantID string, kinds []commitlayer.FactType, from, to time.Time) ([]commitlayer.Fact, error) {
	if len(kinds) == 0 {
		return nil, nil
	}
	if err := checkTimes("from", from, "to", to); err != nil {
		return nil, fmt.Errorf("facts of kinds: %w", classify(err))
	}
	sources := make([]string, len(kinds))
	types := make([]string, len(kinds))
	for i, k := range kinds {
		sources[i], types[i] = k.Source, k.Type
	}
	rows, err := db.pool.Query(ctx, `SELECT `+factColumns+` FROM facts
		WHERE tenant_id = $1
		AND (source, type) IN (SELECT * FROM unnest($2::text[], $3::text[]))
		AND occurred_at BETWEEN $4 AND $5
		ORDER BY occurred_at, seq`, tenantID, sources, types, lowerBound(from), upperBound(to))
	if err != nil {
		return nil, fmt.Errorf("facts of kinds: %w", classify(err))
	}
	facts, err := pgx.CollectRows(rows, scanFact)
	if err != nil {
		return nil, fmt.Errorf("facts of kinds: %w", classify(err))
	}
	return facts, nil
}

// FactsByExternalID returns one fact, commitlayer.ErrNotFound if the tenant has none
// with that source and external id.
func (db *DB) FactsByExternalID(ctx context.Context, tenantID, source, externalID string) (commitlayer.Fact, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+factColumns+` FROM facts
		WHERE tenant_id = $1 AND source = $2 AND external_id = $3`, tenantID, source, externalID)
	if err != nil {
		return commitlayer.Fact{}, fmt.Errorf("fact %s/%s: %w", source, externalID, classify(err))
	}
	f, err := pgx.CollectExactlyOneRow(rows, scanFact)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitlayer.Fact{}, fmt.Errorf("fact %s/%s: %w", source, externalID, commitlayer.ErrNotFound)
	}
	if err != nil {
		return commitlayer.Fact{}, fmt.Errorf("fact %s/%s: %w", source, externalID, classify(err))
	}
	return f, nil
}

func scanFact(row pgx.CollectableRow) (commitlayer.Fact, error) {
	var (
		f       commitlayer.Fact
		subject string
		attrs   []byte
		links   []string
	)
	if err := row.Scan(&f.Seq, &f.Source, &f.Type, &subject, &f.ExternalID, &f.OccurredAt, &attrs, &links); err != nil {
		return f, err
	}
	f.Subject = commitlayer.Subject(subject)
	f.OccurredAt = f.OccurredAt.UTC()
	a, err := decodeAttrs(attrs)
	if err != nil {
		return f, fmt.Errorf("fact %s/%s attrs: %w", f.Source, f.ExternalID, classify(err))
	}
	f.Attrs = a
	for _, l := range links {
		f.Links = append(f.Links, commitlayer.Subject(l))
	}
	return f, nil
}

// decodeAttrs decodes stored attrs (commitlayer.DecodeStoredAttrs); SQL
// NULL gives nil.
func decodeAttrs(b []byte) (commitlayer.Attrs, error) {
	if b == nil {
		return nil, nil
	}
	return commitlayer.DecodeStoredAttrs(b)
}

// linkKeys prefixes each link with the tenant id, as facts.link_keys holds
// them (see migrations/0002_fact_link_keys.sql).
func linkKeys(tenantID string, links []string) []string {
	out := make([]string, len(links))
	for i, l := range links {
		out[i] = tenantID + linkKeySep + l
	}
	return out
}

// linkKeySep joins a tenant and a link into a link key (linkKeys).
const linkKeySep = " "
