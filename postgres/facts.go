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

// InsertFacts stores a batch whole or not at all, with source coverage, in one
// transaction. A fact whose (source, external_id) is stored or earlier in the
// batch is skipped (the first wins); stored facts are numbered in batch order.
// An invalid fact fails the batch (commitlayer.ErrInvalid, with a
// *commitlayer.FieldError from Validate); an unknown tenant gives ErrNotFound.
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
		// The batch as given: a deliverer may wake more than it must, never fewer.
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

// encodeFacts validates the batch and drops in-batch duplicates; an error names
// the fact by its index counted from first.
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

// insertFacts stores the rows not stored yet and updates source coverage; it
// sets Inserted and Subjects (the caller sets Duplicates).
//
// Rows go in in key order (source, external_id) so two batches sharing a fact
// never wait in a cycle (a deadlock inTx retries only so often). A batch of new
// facts (the common one) is COPYed straight into facts under a savepoint,
// avoiding ON CONFLICT's speculative insertion (~20 % of PostgreSQL's CPU per
// fact, docs/benchmarks.md). One that meets a stored or concurrently stored
// fact hits the unique constraint, rolls back to the savepoint and goes in
// again via the staging table with ON CONFLICT DO NOTHING (stageFacts); since
// that costs up to twice the insert, the tenant's batches are staged straight
// away for metStoredWindow. Any other error ends the transaction.
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

// metStoredWindow is how long a tenant's batches are staged after one met a stored fact.
const metStoredWindow = time.Minute

// factKeyConstraint is the unique (tenant, source, external_id) of migration 0001.
const factKeyConstraint = "facts_tenant_id_source_external_id_key"

// isFactKeyViolation reports a duplicate of a stored fact.
func isFactKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == factKeyConstraint
}

// numberFacts numbers a copy of rows in batch order and sorts it by key (rows
// keeps its order for a retried transaction).
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

// The staging table: a temporary table per connection (createFactsIn), emptied
// at commit, so batches make no catalog churn. Hence the store needs session
// connections (no transaction-pooling proxy) and the TEMPORARY privilege.
const (
	factsIn          = "facts_in"
	createFactsInSQL = `CREATE TEMP TABLE IF NOT EXISTS ` + factsIn + ` (seq bigint, tenant_id text, source text, type text,
		subject text, external_id text, occurred_at timestamptz, attrs jsonb, links text[], link_keys text[]) ON COMMIT DELETE ROWS`
)

func createFactsIn(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, createFactsInSQL)
	return err
}

// factColumnsIn are the columns COPY writes, into facts and facts_in alike.
var factColumnsIn = []string{"seq", "tenant_id", "source", "type", "subject", "external_id", "occurred_at", "attrs", "links", "link_keys"}

// copyFacts writes rows with their link keys into table by COPY.
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

// copyNewFacts COPYs new rows into facts and updates coverage in source order;
// a stored fact fails it on factKeyConstraint.
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

// stageFacts stores the rows not stored yet through the staging table and
// updates the coverage of every source of the batch, in source order.
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

// lockTenant checks that the tenant exists and keeps it until tx ends, taking
// the lock an RI check takes: facts has no foreign key to tenants (a per-row
// RI check cost 10–20 % of ingest's CPU; migration 0013). A concurrent
// DeleteTenant makes this report ErrNotFound; a later one waits for tx.
func lockTenant(ctx context.Context, tx pgx.Tx, tenantID string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR KEY SHARE`, tenantID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("tenant %q: %w", tenantID, commitlayer.ErrNotFound)
	}
	return err
}

const factColumns = `seq, source, type, subject, external_id, occurred_at, attrs, links`

// factsAboutSQL is FactsAbout's query ($1 tenant, $2 subjects, $3 their link
// keys). d holds only facts with links (others name no further subject); the
// result is the facts linking the subjects plus those on every subject in $2
// or mentioned by d.
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

// FactsAbout returns, by occurred_at then seq, the facts on or linking any of
// subjects, and the facts on every subject one link hop away from those (an
// order fact linking customer:c1 brings in customer:c1's facts). Facts that
// merely link a one-hop subject are left out.
func (db *DB) FactsAbout(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Fact, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	subs := subjectStrings(subjects)
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

// FactsOfKinds returns the facts of kinds that occurred in [from, to] (a zero
// end is open), ordered by occurred_at then seq.
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
	return queryAll(ctx, db.pool, "facts of kinds", scanFact, `SELECT `+factColumns+` FROM facts
		WHERE tenant_id = $1
		AND (source, type) IN (SELECT * FROM unnest($2::text[], $3::text[]))
		AND occurred_at BETWEEN $4 AND $5
		ORDER BY occurred_at, seq`, tenantID, sources, types, lowerBound(from), upperBound(to))
}

// FactsByExternalID returns one fact, commitlayer.ErrNotFound if the tenant has none
// with that source and external id.
func (db *DB) FactsByExternalID(ctx context.Context, tenantID, source, externalID string) (commitlayer.Fact, error) {
	return queryOne(ctx, db.pool, fmt.Sprintf("fact %s/%s", source, externalID), scanFact, `SELECT `+factColumns+` FROM facts
		WHERE tenant_id = $1 AND source = $2 AND external_id = $3`, tenantID, source, externalID)
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

// decodeAttrs decodes stored attrs; SQL NULL gives nil.
func decodeAttrs(b []byte) (commitlayer.Attrs, error) {
	if b == nil {
		return nil, nil
	}
	return commitlayer.DecodeStoredAttrs(b)
}

// linkKeys prefixes each link with the tenant, as facts.link_keys holds them
// (migrations/0002_fact_link_keys.sql).
func linkKeys(tenantID string, links []string) []string {
	out := make([]string, len(links))
	for i, l := range links {
		out[i] = tenantID + linkKeySep + l
	}
	return out
}

// linkKeySep joins a tenant and a link into a link key (linkKeys).
const linkKeySep = " "
