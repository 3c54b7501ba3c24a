package pgquery

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// source makes a schema of its own on the test database with a refunds
// table of n rows, the i-th (from 1) on order o_i of customer c_(i%2),
// created at t0 + i s, or at t0 for all when sameTime.
func source(t *testing.T, n int, sameTime bool) (dsn, schema string) {
	t.Helper()
	dsn = testenv.Postgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	schema = fmt.Sprintf("pgq_%d", time.Now().UnixNano())
	_, err = conn.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.refunds (id bigserial PRIMARY KEY, order_id text, customer_id text, amount bigint,
  currency text, rate numeric, meta jsonb, ref uuid, created_at timestamptz NOT NULL)`, schema))
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	})
	for i := 1; i <= n; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		if sameTime {
			at = t0
		}
		_, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.refunds (order_id, customer_id, amount, currency, rate, meta, ref, created_at)
VALUES ($1, $2, $3, 'USD', 2500.00, '{"by":"bot","n":1}', gen_random_uuid(), $4)`, schema),
			fmt.Sprintf("o_%d", i), fmt.Sprintf("c_%d", i%2), int64(i*100), at)
		require.NoError(t, err)
	}
	return dsn, schema
}

func refundsQuery(schema string) Query {
	return Query{
		Type: "refund_created",
		SQL: fmt.Sprintf(`SELECT id, order_id, customer_id, amount, currency, rate, meta, created_at FROM %s.refunds
WHERE $1::bigint IS NULL OR id > $1::bigint ORDER BY id LIMIT $2`, schema),
		Cursor: "id", Subject: "order_id", SubjectType: "order", OccurredAt: "created_at",
		Links: map[string]string{"customer_id": "customer"},
	}
}

func TestPullPagesThroughTheTable(t *testing.T) {
	dsn, schema := source(t, 5, false)
	c := &Client{Config: Config{DSN: dsn, RowLimit: 2, Queries: []Query{refundsQuery(schema)}}}
	ctx := context.Background()
	var all []commitlayer.Fact
	cursor := ""
	var pages []int
	for range 5 {
		p, err := c.Pull(ctx, "payments", cursor)
		require.NoError(t, err)
		all = append(all, p.Facts...)
		pages = append(pages, len(p.Facts))
		cursor = p.Next
		if !p.More {
			break
		}
	}
	require.Equal(t, []int{2, 2, 1}, pages)
	require.Equal(t, `{"refund_created":"5"}`, cursor)
	require.Len(t, all, 5)
	f := all[0]
	require.Equal(t, "payments", f.Source)
	require.Equal(t, "refund_created", f.Type)
	require.Equal(t, commitlayer.Subject("order:o_1"), f.Subject)
	require.Equal(t, "refund_created:1", f.ExternalID)
	require.Equal(t, t0.Add(time.Second), f.OccurredAt)
	require.Equal(t, []commitlayer.Subject{"customer:c_1"}, f.Links)
	require.Equal(t, commitlayer.Attrs{"id": int64(1), "amount": int64(100), "currency": "USD", "rate": int64(2500),
		"meta": map[string]any{"by": "bot", "n": int64(1)}}, f.Attrs)

	// Nothing new: no facts, the cursor stays.
	p, err := c.Pull(ctx, "payments", cursor)
	require.NoError(t, err)
	require.Empty(t, p.Facts)
	require.False(t, p.More)
	require.Equal(t, cursor, p.Next)
}

func TestPullExplicitColumns(t *testing.T) {
	dsn, schema := source(t, 2, false)
	q := refundsQuery(schema)
	q.SQL = fmt.Sprintf(`SELECT id, 'order:' || order_id AS subject, ref, amount, created_at FROM %s.refunds
WHERE $1::bigint IS NULL OR id > $1::bigint ORDER BY id`, schema)
	q.Subject, q.SubjectType, q.ExternalID, q.Attrs, q.Links = "subject", "", "ref", []string{"amount"}, nil
	c := &Client{Config: Config{DSN: dsn, Queries: []Query{q}}}
	p, err := c.Pull(context.Background(), "payments", "")
	require.NoError(t, err)
	require.Len(t, p.Facts, 2)
	require.Equal(t, commitlayer.Subject("order:o_2"), p.Facts[1].Subject)
	require.Len(t, p.Facts[1].ExternalID, 36, "the uuid's text")
	require.Equal(t, commitlayer.Attrs{"amount": int64(200)}, p.Facts[1].Attrs)
	require.False(t, p.More)
}

func TestPullKeepsRowsSharingTheCursorTogether(t *testing.T) {
	dsn, schema := source(t, 3, true)
	q := refundsQuery(schema)
	q.SQL = fmt.Sprintf(`SELECT id, order_id, customer_id, created_at FROM %s.refunds
WHERE $1::timestamptz IS NULL OR created_at > $1::timestamptz ORDER BY created_at, id LIMIT $2`, schema)
	q.Cursor, q.ExternalID = "created_at", "id"
	// Two rows at t0 and one later: with a limit of 2 the page ends before
	// the later one, and no row at t0 is skipped.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, fmt.Sprintf(`UPDATE %s.refunds SET created_at = $1 WHERE id = 3`, schema), t0.Add(time.Minute))
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	c := &Client{Config: Config{DSN: dsn, RowLimit: 2, Queries: []Query{q}}}
	p, err := c.Pull(ctx, "payments", "")
	require.NoError(t, err)
	require.Len(t, p.Facts, 2)
	require.True(t, p.More)
	p2, err := c.Pull(ctx, "payments", p.Next)
	require.NoError(t, err)
	require.Len(t, p2.Facts, 1)
	require.Equal(t, "3", p2.Facts[0].ExternalID)

	// With a limit of 1, two rows share the first cursor value: an error,
	// not a silent skip.
	c.Config.RowLimit = 1
	_, err = c.Pull(ctx, "payments", "")
	require.ErrorIs(t, err, ErrBadRow)
	require.ErrorContains(t, err, "more than 1 rows share one cursor value")
}

func TestPullIsReadOnlyAndBounded(t *testing.T) {
	dsn, schema := source(t, 2, false)
	ctx := context.Background()
	tests := []struct {
		name    string
		mutate  func(*Query, *Config)
		is      error
		message string
	}{
		{"a write in a function is refused by the transaction", func(q *Query, _ *Config) {
			q.SQL = fmt.Sprintf(`SELECT id, order_id, customer_id, created_at, nextval('%s.refunds_id_seq') AS n FROM %s.refunds WHERE $1::bigint IS NULL ORDER BY id`, schema, schema)
		}, nil, "read-only transaction"},
		{"statement timeout", func(q *Query, c *Config) {
			c.StatementTimeout = "100ms"
			q.SQL = fmt.Sprintf(`SELECT id, order_id, customer_id, created_at, pg_sleep(1) AS s FROM %s.refunds WHERE $1::bigint IS NULL ORDER BY id`, schema)
		}, ErrUnreachable, "statement timeout"},
		{"missing column", func(q *Query, _ *Config) { q.OccurredAt = "when" }, ErrBadRow, `no column "when"`},
		{"null subject", func(q *Query, _ *Config) {
			q.SQL = fmt.Sprintf(`SELECT id, NULL::text AS order_id, customer_id, created_at FROM %s.refunds WHERE $1::bigint IS NULL ORDER BY id`, schema)
		}, ErrBadRow, "row 1: subject column order_id is empty"},
		{"cursor out of order", func(q *Query, _ *Config) {
			q.SQL = fmt.Sprintf(`SELECT id, order_id, customer_id, created_at FROM %s.refunds WHERE $1::bigint IS NULL ORDER BY id DESC`, schema)
		}, ErrBadRow, "row 2: cursor id decreases"},
		{"bad sql", func(q *Query, _ *Config) {
			q.SQL = `SELECT * FROM no_such_table WHERE $1::bigint IS NULL`
		}, nil, "SQLSTATE 42P01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := refundsQuery(schema)
			cfg := Config{DSN: dsn}
			tt.mutate(&q, &cfg)
			cfg.Queries = []Query{q}
			c := &Client{Config: cfg}
			_, err := c.Pull(ctx, "payments", "")
			require.Error(t, err)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			require.ErrorContains(t, err, tt.message)
			require.ErrorContains(t, err, "pull payments: query refund_created: ")
		})
	}
	// Nothing was written by the refused query.
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var last int64
	require.NoError(t, conn.QueryRow(ctx, fmt.Sprintf("SELECT last_value FROM %s.refunds_id_seq", schema)).Scan(&last))
	require.Equal(t, int64(2), last)
}

func TestPullUnreachableKeepsThePasswordOut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	const pw = "s3cret-password-xyz"
	c := &Client{ConnectTimeout: time.Second, Config: Config{DSN: "postgres://reader:" + pw + "@" + addr + "/db?sslmode=disable",
		Queries: []Query{{Type: "t", SQL: "SELECT 1 WHERE $1 IS NULL", Cursor: "id", Subject: "s", OccurredAt: "at"}}}}
	_, err = c.Pull(context.Background(), "src", "")
	require.ErrorIs(t, err, ErrUnreachable)
	require.NotContains(t, err.Error(), pw)

	_, err = c.Pull(context.Background(), "src", "not json")
	require.ErrorContains(t, err, "cursor is not a JSON object")
}

func TestCheckSelect(t *testing.T) {
	tests := []struct {
		sql  string
		want string // "" means accepted
	}{
		{"SELECT id FROM t WHERE id > $1", ""},
		{"  select id from t where $1::bigint is null or id > $1::bigint order by id limit $2;", ""},
		{"WITH r AS (SELECT * FROM t) SELECT * FROM r WHERE id > $1", ""},
		{"(SELECT id FROM t WHERE id > $1)", ""},
		{"-- a comment\nSELECT id FROM t WHERE id > $1", ""},
		{"SELECT 'a;b' AS x FROM t WHERE id > $1", "single statement"},
		{"", "is required"},
		{"DELETE FROM t WHERE id > $1", "must be a SELECT, not DELETE"},
		{"UPDATE t SET x = 1 WHERE id > $1", "must be a SELECT, not UPDATE"},
		{"SELECT 1 WHERE $1 IS NULL; DROP TABLE t", "single statement"},
		{"WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d WHERE id > $1", `found "delete"`},
		{"SELECT * FROM t WHERE id > $1 FOR UPDATE", `found "update"`},
		{"SELECT * INTO copy FROM t WHERE id > $1", `found "into"`},
		{"SELECT * FROM t", "must use $1"},
		{"SELECT * FROM t WHERE id > $1 AND x = $3", "not $3"},
		{"/* SELECT */ TRUNCATE t -- $1", "must be a SELECT, not TRUNCATE"},
	}
	for _, tt := range tests {
		err := CheckSelect(tt.sql)
		if tt.want == "" {
			require.NoError(t, err, tt.sql)
		} else {
			require.ErrorContains(t, err, tt.want, tt.sql)
		}
	}
}

func TestParseConfig(t *testing.T) {
	good := `{"dsn":"postgres://reader@127.0.0.1/shop","queries":[{"type":"refund_created","sql":"SELECT id FROM r WHERE id > $1","cursor":"id","subject":"order_id","subject_type":"order","occurred_at":"at"}]}`
	c, err := ParseConfig([]byte(good))
	require.NoError(t, err)
	require.Equal(t, "order", c.Queries[0].SubjectType)
	tests := []struct{ body, want string }{
		{`{"dsn":"","queries":[]}`, "dsn: is required"},
		{`{"dsn":"postgres://x@h/db","queries":[]}`, "queries: at least one query is required"},
		{`{"dsn":"postgres://x@h/db","queries":[{"type":"t","sql":"SELECT 1 WHERE $1 IS NULL","cursor":"id","subject":"s","occurred_at":"at"}],"row_limit":99999}`, "row_limit: must be between"},
		{`{"dsn":"postgres://x@h/db","queries":[{"type":"t","sql":"SELECT 1 WHERE $1 IS NULL","cursor":"id","subject":"s","occurred_at":"at"}],"statement_timeout":"2h"}`, "statement_timeout:"},
		{`{"dsn":"postgres://x@h/db","queries":[{"type":"t","sql":"DELETE FROM t WHERE $1","cursor":"id","subject":"s","occurred_at":"at"}]}`, "queries[0].sql: must be a SELECT"},
		{`{"dsn":"postgres://x@h/db","queries":[{"type":"t","sql":"SELECT 1 WHERE $1 IS NULL","subject":"s","occurred_at":"at"}]}`, "queries[0].cursor: is required"},
		{`{"dsn":"postgres://x@h/db","queries":[{"type":"t","sql":"SELECT 1 WHERE $1 IS NULL","cursor":"id","subject":"s","occurred_at":"at","subject_type":"Order"}]}`, "queries[0].subject_type"},
		{`{"dsn":"postgres://x@h/db","queries":[{"type":"t","sql":"SELECT 1 WHERE $1 IS NULL","cursor":"id","subject":"s","occurred_at":"at"},{"type":"t","sql":"SELECT 1 WHERE $1 IS NULL","cursor":"id","subject":"s","occurred_at":"at"}]}`, "queries[1].type"},
		{`{"dsn":"postgres://x@h/db","queries":[],"extra":1}`, "unknown field"},
	}
	for _, tt := range tests {
		_, err := ParseConfig([]byte(tt.body))
		require.ErrorContains(t, err, tt.want, tt.body)
	}
}
