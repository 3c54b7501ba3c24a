package pgquery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commitlayer/commitlayer"
)

// Client pulls one postgres connector.
type Client struct {
	Config Config
	// DialFunc, when set, makes the connections (the worker's address
	// rules go here); nil dials directly.
	DialFunc pgconn.DialFunc
	// ConnectTimeout bounds connecting; 0 means 10 s.
	ConnectTimeout time.Duration
}

// Pull reads, for each query, the rows after the cursor (at most the row
// limit) in its own READ ONLY transaction, as facts of source. cursor is the
// Next of the previous pull ("" at first).
func (c *Client) Pull(ctx context.Context, source, cursor string) (commitlayer.FactPage, error) {
	if err := c.Config.Validate(); err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s: %w", source, err)
	}
	if !commitlayer.ValidName(source) {
		return commitlayer.FactPage{}, fmt.Errorf("pull %q: source name may only hold letters, digits, '_', '-' and '.'", source)
	}
	pos := map[string]string{}
	if cursor != "" {
		if err := json.Unmarshal([]byte(cursor), &pos); err != nil {
			return commitlayer.FactPage{}, fmt.Errorf("pull %s: cursor is not a JSON object of strings: %w", source, err)
		}
	}
	conn, err := c.connect(ctx)
	if err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s: %w", source, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	page := commitlayer.FactPage{}
	for _, q := range c.Config.Queries {
		facts, last, more, err := c.pullQuery(ctx, conn, source, q, pos[q.Type])
		if err != nil {
			return commitlayer.FactPage{}, fmt.Errorf("pull %s: query %s: %w", source, q.Type, c.redact(err))
		}
		page.Facts = append(page.Facts, facts...)
		if last != "" {
			pos[q.Type] = last
		}
		page.More = page.More || more
	}
	next, err := json.Marshal(pos)
	if err != nil {
		return commitlayer.FactPage{}, fmt.Errorf("pull %s: encode cursor: %w", source, err)
	}
	page.Next = string(next)
	return page, nil
}

func (c *Client) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(c.Config.DSN)
	if err != nil {
		return nil, errors.New("dsn is not a PostgreSQL connection string")
	}
	cfg.ConnectTimeout = c.ConnectTimeout
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if c.DialFunc != nil {
		cfg.DialFunc = c.DialFunc
	}
	cfg.RuntimeParams["application_name"] = "commitlayer-connector"
	// No prepared statements kept: each query runs once per pull.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			// The server answered (a password refused, no such database):
			// say so, it is not "unreachable".
			err = &SQLError{Code: pgErr.Code, Message: pgErr.Message, Err: err}
		}
		return nil, fmt.Errorf("connect to %s: %w: %w", cfg.Host, ErrUnreachable, c.redact(err))
	}
	return conn, nil
}

// redact keeps the DSN's password out of an error's text.
func (c *Client) redact(err error) error {
	cfg, perr := pgx.ParseConfig(c.Config.DSN)
	if perr != nil || cfg.Password == "" || !strings.Contains(err.Error(), cfg.Password) {
		return err
	}
	return &redacted{msg: strings.ReplaceAll(err.Error(), cfg.Password, "***"), err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// pullQuery reads one query's rows after the cursor value after.
func (c *Client) pullQuery(ctx context.Context, conn *pgx.Conn, source string, q Query, after string) ([]commitlayer.Fact, string, bool, error) {
	timeout, _ := c.Config.timeout()
	limit := c.Config.rowLimit()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, "", false, classify(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", strconv.FormatInt(timeout.Milliseconds(), 10)); err != nil {
		return nil, "", false, classify(err)
	}
	var cur any
	if after != "" {
		cur = after
	}
	args := []any{cur}
	if strings.Contains(q.SQL, "$2") {
		args = append(args, limit+1)
	}
	rows, err := tx.Query(ctx, q.SQL, args...)
	if err != nil {
		return nil, "", false, classify(err)
	}
	defer rows.Close()
	if len(rows.FieldDescriptions()) == 0 {
		// The statement failed before describing its rows.
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, "", false, classify(err)
		}
	}
	cols := map[string]int{}
	for i, fd := range rows.FieldDescriptions() {
		cols[fd.Name] = i
	}
	for _, need := range []string{q.Cursor, q.Subject, q.OccurredAt, q.ExternalID} {
		if _, ok := cols[need]; need != "" && !ok {
			return nil, "", false, fmt.Errorf("%w: the query has no column %q", ErrBadRow, need)
		}
	}
	type read struct {
		fact   commitlayer.Fact
		cursor any
	}
	var got []read
	for rows.Next() && len(got) <= limit {
		vals, err := rows.Values()
		if err != nil {
			return nil, "", false, fmt.Errorf("%w: row %d: %v", ErrBadRow, len(got)+1, err)
		}
		f, err := rowFact(source, q, cols, vals)
		if err != nil {
			return nil, "", false, fmt.Errorf("%w: row %d: %v", ErrBadRow, len(got)+1, err)
		}
		cv := vals[cols[q.Cursor]]
		if cv == nil {
			return nil, "", false, fmt.Errorf("%w: row %d: cursor %s is NULL", ErrBadRow, len(got)+1, q.Cursor)
		}
		if len(got) > 0 {
			c, err := compare(got[len(got)-1].cursor, cv)
			if err != nil {
				return nil, "", false, fmt.Errorf("%w: row %d: cursor %s: %v", ErrBadRow, len(got)+1, q.Cursor, err)
			}
			if c > 0 {
				return nil, "", false, fmt.Errorf("%w: row %d: cursor %s decreases; ORDER BY %s", ErrBadRow, len(got)+1, q.Cursor, q.Cursor)
			}
		}
		got = append(got, read{f, cv})
	}
	if err := rows.Err(); err != nil {
		return nil, "", false, classify(err)
	}
	rows.Close()
	more := len(got) > limit
	if more {
		// Keep whole cursor values: rows sharing the cursor value of the
		// first row left out are read next time (the next pull asks for
		// values after the last one kept).
		edge := got[limit].cursor
		got = got[:limit]
		for len(got) > 0 {
			if c, _ := compare(got[len(got)-1].cursor, edge); c != 0 {
				break
			}
			got = got[:len(got)-1]
		}
		if len(got) == 0 {
			return nil, "", false, fmt.Errorf("%w: more than %d rows share one cursor value; use a cursor column that tells them apart", ErrBadRow, limit)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, "", false, classify(err)
	}
	facts := make([]commitlayer.Fact, len(got))
	last := ""
	for i, r := range got {
		facts[i] = r.fact
		last, _ = text(r.cursor)
	}
	return facts, last, more, nil
}

// SQLError is an error the database answered, with the class a tenant
// sees (netguard.Classify reads ErrorClass).
type SQLError struct {
	Code, Message string
	Err           error
}

func (e *SQLError) Error() string { return fmt.Sprintf("%s (SQLSTATE %s)", e.Message, e.Code) }
func (e *SQLError) Unwrap() error { return e.Err }

// ErrorClass is the tenant's view of the error: no text of the server's.
func (e *SQLError) ErrorClass() string {
	switch {
	case e.Code == "57014":
		return "timeout"
	case strings.HasPrefix(e.Code, "28"):
		return "authentication failed"
	case e.Code == "3D000":
		return "database does not exist"
	case e.Code == "25006":
		return "sql error 25006 (the query tried to write)"
	}
	return "sql error " + e.Code
}

func sqlError(pgErr *pgconn.PgError) *SQLError {
	return &SQLError{Code: pgErr.Code, Message: pgErr.Message, Err: pgErr}
}

// classify marks connection trouble and timeouts as ErrUnreachable, and
// gives SQL errors their class.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "57014", // query_canceled: the statement timeout
			strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "57P"):
			return fmt.Errorf("%w: %w", ErrUnreachable, sqlError(pgErr))
		}
		return sqlError(pgErr)
	}
	var ne net.Error
	if errors.As(err, &ne) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}

// rowFact maps one row to a fact.
func rowFact(source string, q Query, cols map[string]int, vals []any) (commitlayer.Fact, error) {
	f := commitlayer.Fact{Source: source, Type: q.Type, Attrs: commitlayer.Attrs{}}
	subj, err := text(vals[cols[q.Subject]])
	if err != nil || subj == "" {
		return f, fmt.Errorf("subject column %s is empty or not text", q.Subject)
	}
	if q.SubjectType != "" {
		subj = q.SubjectType + ":" + subj
	}
	f.Subject = commitlayer.Subject(subj)
	idCol := q.ExternalID
	if idCol == "" {
		idCol = q.Cursor
	}
	id, err := text(vals[cols[idCol]])
	if err != nil || id == "" {
		return f, fmt.Errorf("external id column %s is empty or not text", idCol)
	}
	if q.ExternalID == "" {
		id = q.Type + ":" + id
	}
	f.ExternalID = id
	switch t := vals[cols[q.OccurredAt]].(type) {
	case time.Time:
		f.OccurredAt = t.UTC()
	case string:
		at, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return f, fmt.Errorf("occurred_at column %s: %q is not RFC 3339", q.OccurredAt, t)
		}
		f.OccurredAt = at.UTC()
	default:
		return f, fmt.Errorf("occurred_at column %s is not a timestamp", q.OccurredAt)
	}
	mapped := map[string]bool{q.Subject: true, q.OccurredAt: true, q.ExternalID: true}
	for col, typ := range q.Links {
		i, ok := cols[col]
		if !ok {
			return f, fmt.Errorf("link column %s is not in the query", col)
		}
		mapped[col] = true
		if vals[i] == nil {
			continue
		}
		s, err := text(vals[i])
		if err != nil {
			return f, fmt.Errorf("link column %s: %v", col, err)
		}
		if typ != "" {
			s = typ + ":" + s
		}
		f.Links = append(f.Links, commitlayer.Subject(s))
	}
	attrCols := q.Attrs
	if len(attrCols) == 0 {
		for name := range cols {
			if !mapped[name] {
				attrCols = append(attrCols, name)
			}
		}
	}
	for _, col := range attrCols {
		i, ok := cols[col]
		if !ok {
			return f, fmt.Errorf("attrs column %s is not in the query", col)
		}
		v, err := value(vals[i])
		if err != nil {
			return f, fmt.Errorf("column %s: %v", col, err)
		}
		f.Attrs[col] = v
	}
	return f, f.Validate()
}

// value turns a column value into an attribute: integers stay exact,
// numerics are int64 when integral (money is integer minor units), times
// RFC 3339 text, UUIDs their text, JSON as decoded.
func value(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), nil
	case [16]byte:
		return uuid.UUID(x).String(), nil
	case []byte:
		return string(x), nil
	case pgtype.Numeric:
		if !x.Valid {
			return nil, nil
		}
		if x.NaN || x.InfinityModifier != pgtype.Finite {
			return nil, errors.New("numeric is not finite")
		}
		if n, err := x.Int64Value(); err == nil {
			return n.Int64, nil
		}
		f, err := x.Float64Value()
		if err != nil {
			return nil, err
		}
		return integral(f.Float64), nil
	case fmt.Stringer: // inet, intervals, times of day…
		return x.String(), nil
	}
	n, err := commitlayer.NormalizeValue(integral(v))
	if err != nil {
		return fmt.Sprint(v), nil
	}
	return n, nil
}

// integral turns floats that hold an exact integer into int64, in JSON
// values too (pgx decodes json numbers as float64), so 2500.0 and 2500
// compare equal as money.
func integral(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case float32:
		return integral(float64(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = integral(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = integral(e)
		}
		return out
	}
	return v
}

// text is a cursor, id or subject value as text.
func text(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int16:
		return strconv.FormatInt(int64(x), 10), nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), nil
	case [16]byte:
		return uuid.UUID(x).String(), nil
	case pgtype.Numeric:
		b, err := x.MarshalJSON()
		return string(b), err
	case nil:
		return "", errors.New("is NULL")
	}
	return "", fmt.Errorf("a %T is not usable here", v)
}

// compare orders two cursor values of the same column.
func compare(a, b any) (int, error) {
	switch x := widen(a).(type) {
	case int64:
		return compareAs(x, widen(b), cmp.Compare[int64])
	case time.Time:
		return compareAs(x, b, time.Time.Compare)
	case string:
		return compareAs(x, b, strings.Compare)
	case nil:
		return 0, errors.New("is NULL")
	}
	return 0, fmt.Errorf("a %T cannot be a cursor (use an integer, a timestamp or text)", a)
}

func compareAs[T any](x T, b any, compare func(T, T) int) (int, error) {
	y, ok := b.(T)
	if !ok {
		return 0, errors.New("mixed value types")
	}
	return compare(x, y), nil
}

// widen makes the smaller integer columns int64.
func widen(v any) any {
	switch x := v.(type) {
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	}
	return v
}
