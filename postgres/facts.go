package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
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
	rows, err := encodeFacts(facts)
	if err != nil {
		return commitlayer.InsertResult{}, fmt.Errorf("insert facts: %w", classify(err))
	}
	var res commitlayer.InsertResult
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if res, err = db.insertFacts(ctx, tx, tenantID, rows); err != nil {
			return err
		}
		res.NotificationID, err = enqueueNotification(ctx, tx, tenantID, res.Subjects, "")
		return err
	})
	if err != nil {
		return commitlayer.InsertResult{}, fmt.Errorf("insert facts: %w", classify(err))
	}
	res.Duplicates = len(facts) - res.Inserted
	if res.Inserted > 0 {
		// Of the batch as given: the inserted facts and perhaps more, so a
		// screen reading it may wake more than it must, never fewer.
		res.Digest = commitlayer.DigestFacts(facts)
	}
	return res, nil
}

// factRow is a validated fact, encoded for the insert.
type factRow struct {
	source, typ, subject, externalID string
	occurredAt                       time.Time
	attrs                            string   // JSON
	links                            []string // as given; link keys are derived per tenant
}

// encodeFacts validates the batch and drops in-batch duplicates. The
// rows' attrs are written into one buffer and share one string.
func encodeFacts(facts []commitlayer.Fact) ([]factRow, error) {
	type key struct{ source, externalID string }
	seen := make(map[key]bool, len(facts))
	rows := make([]factRow, 0, len(facts))
	var (
		buf      []byte
		ends     = make([]int, 0, len(facts)) // of each row's attrs in buf
		linkSlab []string                     // the rows' links, one after the other
	)
	for i := range facts {
		f := &facts[i]
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("%w: facts[%d]: %w", commitlayer.ErrInvalid, i, classify(err))
		}
		if err := checkTime("occurred_at", f.OccurredAt); err != nil {
			return nil, fmt.Errorf("facts[%d]: %w", i, classify(err))
		}
		k := key{f.Source, f.ExternalID}
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(f.Attrs) > 0 {
			var err error
			if buf, err = f.Attrs.AppendJSON(buf); err != nil {
				return nil, fmt.Errorf("%w: facts[%d].attrs: %w", commitlayer.ErrInvalid, i, classify(err))
			}
		} else {
			buf = append(buf, "{}"...)
		}
		if len(ends) == 0 {
			// Room for every row's attrs, if each is the size of the first.
			buf = slices.Grow(buf, roomAhead(len(buf), len(facts)-i))
		}
		ends = append(ends, len(buf))
		var links []string
		if len(f.Links) > 0 {
			if len(linkSlab)+len(f.Links) > cap(linkSlab) {
				linkSlab = make([]string, 0, max(len(f.Links), 4*(len(facts)-i)))
			}
			for _, l := range f.Links {
				linkSlab = append(linkSlab, string(l))
			}
			links = linkSlab[len(linkSlab)-len(f.Links) : len(linkSlab) : len(linkSlab)]
		}
		rows = append(rows, factRow{
			source: f.Source, typ: f.Type, subject: string(f.Subject), externalID: f.ExternalID,
			occurredAt: f.OccurredAt, links: links,
		})
	}
	all, start := string(buf), 0
	for i, end := range ends {
		rows[i].attrs = all[start:end]
		start = end
	}
	return rows, nil
}

// maxRoomAhead bounds roomAhead: a large first row says little about the
// rest.
const maxRoomAhead = 1 << 20

// roomAhead is the room to make in a buffer for rows more rows of about
// size bytes each (the first row's), up to maxRoomAhead.
func roomAhead(size, rows int) int {
	return min((size+8)*rows, maxRoomAhead)
}

// insertFacts moves the new rows into facts with one statement that also
// updates source coverage. It sets Inserted and Subjects; the caller knows
// the batch size and sets Duplicates.
//
// The batch travels as one array per column and is unnested on the server:
// one round trip, and unlike COPY into a temporary table it leaves no
// catalog churn behind at thousands of batches a minute. Links travel as one
// space-separated string per fact (a subject holds no whitespace).
func (db *DB) insertFacts(ctx context.Context, tx pgx.Tx, tenantID string, rows []factRow) (commitlayer.InsertResult, error) {
	if len(rows) == 0 {
		return commitlayer.InsertResult{}, nil
	}
	if err := lockTenant(ctx, tx, tenantID); err != nil {
		return commitlayer.InsertResult{}, err
	}
	n := len(rows)
	var (
		sources, types, subjects, externalIDs = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		occurred                              = make([]time.Time, n)
		attrs, links, keys                    = make([]string, n), make([]string, n), make([]string, n)
	)
	// Each row's link keys, tab-separated (strings.Join of linkKeys), are
	// written into one buffer and share one string.
	var (
		kb    []byte
		kends = make([]int, n)
	)
	for i, r := range rows {
		sources[i], types[i], subjects[i], externalIDs[i] = r.source, r.typ, r.subject, r.externalID
		occurred[i] = r.occurredAt
		attrs[i] = r.attrs
		links[i] = strings.Join(r.links, " ")
		for j, l := range r.links {
			if j > 0 {
				kb = append(kb, '\t')
			}
			kb = append(append(append(kb, tenantID...), linkKeySep...), l...)
		}
		kends[i] = len(kb)
		if i == 0 {
			kb = slices.Grow(kb, roomAhead(len(kb), n-1))
		}
	}
	allKeys, start := string(kb), 0
	for i, end := range kends {
		keys[i] = allKeys[start:end]
		start = end
	}
	args := []any{tenantID, sources, types, subjects, externalIDs, occurred, attrs, links, keys}
	// A batch of facts none of which is stored yet (the common one) is
	// inserted without ON CONFLICT, under a savepoint: a speculative
	// insertion costs every row a search of the unique index before its
	// insert and a WAL record after it, ~20 % of PostgreSQL's CPU per fact
	// (docs/benchmarks.md, "Session 10"). A batch that holds a fact already
	// stored, or being stored by a concurrent batch, hits the unique
	// constraint: back to the savepoint, and again with ON CONFLICT DO
	// NOTHING, which skips the duplicates. That costs the batch up to
	// twice its insert, so for metStoredWindow after it the tenant's
	// batches go straight to ON CONFLICT (a source that re-sends what it
	// sent pays the double once a window). Any other error (a deadlock for
	// inTx to retry, a check) ends the transaction as before.
	now := time.Now()
	if at, ok := db.metStored.Load(tenantID); !ok || now.Sub(at.(time.Time)) > metStoredWindow {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return commitlayer.InsertResult{}, classify(err)
		}
		res, err := runInsertFacts(ctx, sp, insertNewFactsSQL, args)
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
	return runInsertFacts(ctx, tx, insertFactsSQL, args)
}

// metStoredWindow is how long a tenant's batches skip the insert without
// ON CONFLICT after one of them met a stored fact.
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

// insertFactsSQL inserts the batch's new facts ($1 tenant, $2–$9 one array
// per column), skipping those already stored, and updates the coverage of
// every source in the batch; it returns each inserted fact's subject and
// links. Each fact's sequence number is drawn in batch order, then the
// facts are inserted in key order (source, external_id): two batches that
// share facts wait for each other's uncommitted ones in the same order,
// never in a cycle (a deadlock, which inTx retries only so often). The
// coverage upsert likewise takes its row locks in source order.
const insertFactsSQL = `WITH input AS (
			SELECT i.*, nextval('facts_seq_seq') AS seq
			FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
				$7::text[], $8::text[], $9::text[])
				WITH ORDINALITY AS i(source, type, subject, external_id, occurred_at, attrs, links, link_keys, ord)
		), ins AS (
			INSERT INTO facts (seq, tenant_id, source, type, subject, external_id, occurred_at, attrs, links, link_keys)
			SELECT seq, $1, source, type, subject, external_id, occurred_at, attrs::jsonb,
				string_to_array(links, ' '), string_to_array(link_keys, E'\t')
			FROM input ORDER BY source, external_id
			ON CONFLICT (tenant_id, source, external_id) DO NOTHING
			RETURNING source, subject, links, occurred_at
		), cov AS (
			INSERT INTO source_coverage AS c (tenant_id, source, fact_count, last_fact_at, last_seen_at)
			SELECT $1, b.source, coalesce(i.n, 0), i.last, now()
			FROM (SELECT DISTINCT source FROM input) b
			LEFT JOIN (SELECT source, count(*) AS n, max(occurred_at) AS last FROM ins GROUP BY source) i
				USING (source)
			ORDER BY b.source
			ON CONFLICT (tenant_id, source) DO UPDATE SET
				fact_count = c.fact_count + excluded.fact_count,
				last_fact_at = greatest(c.last_fact_at, excluded.last_fact_at),
				last_seen_at = excluded.last_seen_at
		)
		SELECT subject, links FROM ins`

// insertNewFactsSQL is insertFactsSQL for a batch of facts none of which is
// stored: a duplicate fails it with a unique violation of factKeyConstraint.
var insertNewFactsSQL = strings.Replace(insertFactsSQL, "ON CONFLICT (tenant_id, source, external_id) DO NOTHING", "", 1)

// runInsertFacts runs one of the insert statements and reads what it
// inserted.
func runInsertFacts(ctx context.Context, tx pgx.Tx, sql string, args []any) (commitlayer.InsertResult, error) {
	qrows, err := tx.Query(ctx, sql, args...)
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

// decodeAttrs decodes a stored JSON object with commitlayer.Attrs semantics:
// integers stay int64, other numbers are float64. SQL NULL gives nil.
func decodeAttrs(b []byte) (commitlayer.Attrs, error) {
	if b == nil {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, nil
	}
	// Lenient: a number stored before the exactness rule still reads.
	n, err := commitlayer.NormalizeStoredValue(m)
	if err != nil {
		return nil, err
	}
	return commitlayer.Attrs(n.(map[string]any)), nil
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

// linkKeySep joins a tenant and a link into a link key (linkKeys; and
// insertFacts, which writes a batch's keys into one buffer).
const linkKeySep = " "
