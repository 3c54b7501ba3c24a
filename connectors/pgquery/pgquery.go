// Package pgquery reads facts straight from a PostgreSQL system of record,
// read-only: kind "postgres". Per fact type, a parameterised SELECT maps
// columns to a fact's subject, external id, time, attrs and links; a cursor
// column, increasing in the query's order, lets each pull resume after the
// last row read.
//
// Each pull of each query runs in a READ ONLY transaction with a statement
// timeout, reads at most the row limit, and refuses SQL that is not a single
// SELECT (or WITH … SELECT). Give the connector a role that can only read.
//
// The query gets the cursor as $1 (text; NULL on the first pull) and, when
// it uses $2, the row limit plus one:
//
//	SELECT id, order_id, amount, currency, created_at FROM refunds
//	WHERE $1::bigint IS NULL OR id > $1::bigint ORDER BY id LIMIT $2
package pgquery

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// Kind is the connector kind this package serves.
const Kind = "postgres"

// Limits.
const (
	DefaultRowLimit         = 1000
	MaxRowLimit             = 10000
	DefaultStatementTimeout = 5 * time.Second
	MaxStatementTimeout     = 60 * time.Second
	// MaxQueries bounds the queries of one connector.
	MaxQueries = 32
)

var (
	// ErrUnreachable means the database could not be reached or timed out.
	ErrUnreachable = errors.New("postgres source unreachable")
	// ErrBadRow means a row could not be made into a fact (a missing or
	// malformed column), or the rows broke the cursor's order.
	ErrBadRow = errors.New("postgres source gave a bad row")
)

// Config is a postgres connector's configuration.
type Config struct {
	// DSN is the connection string (postgres://role@host/db). It holds a
	// secret: it is never written into errors or logs by this package.
	DSN string `json:"dsn"`
	// StatementTimeout bounds each query ("5s"); empty means 5 s.
	StatementTimeout string `json:"statement_timeout,omitempty"`
	// RowLimit bounds the rows read per query per pull; 0 means 1000.
	RowLimit int     `json:"row_limit,omitempty"`
	Queries  []Query `json:"queries"`
}

// Query reads the facts of one type.
type Query struct {
	// Type is the fact type the rows become (refund_created).
	Type string `json:"type"`
	// SQL is one SELECT with $1 (the cursor, text, NULL at first) and
	// optionally $2 (the row limit + 1), ordered by the cursor column.
	SQL string `json:"sql"`
	// Cursor is the column whose last value resumes the next pull; its
	// values must not decrease in the query's order (an integer, a
	// timestamp or text).
	Cursor string `json:"cursor"`
	// Subject is the column holding the subject; with SubjectType its value
	// is the id ("o_1001" → "order:o_1001"), without it "type:id".
	Subject     string `json:"subject"`
	SubjectType string `json:"subject_type,omitempty"`
	// ExternalID is the column of the row's stable id; empty means the
	// cursor column (then "<type>:<cursor>").
	ExternalID string `json:"external_id,omitempty"`
	// OccurredAt is the timestamp column of when it happened.
	OccurredAt string `json:"occurred_at"`
	// Attrs are the columns copied into attrs; empty means every column
	// not mapped above.
	Attrs []string `json:"attrs,omitempty"`
	// Links maps a column to the subject type of its value
	// ({"customer_id":"customer"}); an empty type means the value is a
	// whole "type:id". NULL values add no link.
	Links map[string]string `json:"links,omitempty"`
}

// ParseConfig decodes and validates a configuration (JSON, unknown fields
// refused).
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("postgres connector config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks the configuration; errors name the field.
func (c *Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &commitlayer.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if c.DSN == "" {
		return bad("dsn", "is required")
	}
	if _, err := pgx.ParseConfig(c.DSN); err != nil {
		return bad("dsn", "is not a PostgreSQL connection string")
	}
	if _, err := c.timeout(); err != nil {
		return bad("statement_timeout", "%v", err)
	}
	if c.RowLimit < 0 || c.RowLimit > MaxRowLimit {
		return bad("row_limit", "must be between 1 and %d (0: %d)", MaxRowLimit, DefaultRowLimit)
	}
	if len(c.Queries) == 0 {
		return bad("queries", "at least one query is required")
	}
	if len(c.Queries) > MaxQueries {
		return bad("queries", "at most %d", MaxQueries)
	}
	types := map[string]bool{}
	for i, q := range c.Queries {
		f := func(name string) string { return fmt.Sprintf("queries[%d].%s", i, name) }
		switch {
		case q.Type == "":
			return bad(f("type"), "is required")
		case types[q.Type]:
			return bad(f("type"), "%q has another query already", q.Type)
		case q.Cursor == "":
			return bad(f("cursor"), "is required")
		case q.Subject == "":
			return bad(f("subject"), "is required")
		case q.OccurredAt == "":
			return bad(f("occurred_at"), "is required")
		}
		types[q.Type] = true
		if err := CheckSelect(q.SQL); err != nil {
			return bad(f("sql"), "%v", err)
		}
		if q.SubjectType != "" {
			if _, err := commitlayer.ParseSubject(q.SubjectType + ":x"); err != nil {
				return bad(f("subject_type"), "%q may only hold a-z, 0-9 and _", q.SubjectType)
			}
		}
	}
	return nil
}

func (c *Config) timeout() (time.Duration, error) {
	if c.StatementTimeout == "" {
		return DefaultStatementTimeout, nil
	}
	d, err := time.ParseDuration(c.StatementTimeout)
	if err != nil || d <= 0 || d > MaxStatementTimeout {
		return 0, fmt.Errorf("%q must be a duration above 0 and at most %s", c.StatementTimeout, MaxStatementTimeout)
	}
	return d, nil
}

func (c *Config) rowLimit() int {
	if c.RowLimit <= 0 {
		return DefaultRowLimit
	}
	return c.RowLimit
}

// CheckSelect accepts one SELECT (or WITH … SELECT, or a parenthesised
// SELECT) statement using the parameter $1: no second statement, nothing
// that writes or locks. The READ ONLY transaction is the guarantee; this
// refuses the obvious mistakes early with a clear message.
func CheckSelect(sql string) error {
	s := strings.TrimSpace(stripComments(sql))
	s = strings.TrimSuffix(s, ";")
	if s == "" {
		return errors.New("is required")
	}
	if strings.Contains(s, ";") {
		return errors.New("must be a single statement (no ';' inside)")
	}
	first := strings.ToLower(firstWord(strings.TrimLeft(s, "(")))
	if first != "select" && first != "with" {
		return fmt.Errorf("must be a SELECT, not %s", strings.ToUpper(first))
	}
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '$')
	})
	lower := " " + strings.Join(words, " ") + " "
	for _, w := range []string{" insert ", " update ", " delete ", " merge ", " truncate ", " for update ", " for share ", " for no key update ", " for key share ", " into "} {
		if strings.Contains(lower, w) {
			return fmt.Errorf("must only read (found %q)", strings.TrimSpace(w))
		}
	}
	if !strings.Contains(s, "$1") {
		return errors.New("must use $1, the cursor, to read only the rows after it")
	}
	for i := 3; i <= 9; i++ {
		if strings.Contains(s, fmt.Sprintf("$%d", i)) {
			return fmt.Errorf("may only use $1 (cursor) and $2 (row limit), not $%d", i)
		}
	}
	return nil
}

// stripComments removes -- and /* */ comments (outside quotes, roughly:
// enough for the checks above; the transaction mode is what holds).
func stripComments(s string) string {
	var b strings.Builder
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\'':
			inQuote = !inQuote
			b.WriteByte(s[i])
		case !inQuote && strings.HasPrefix(s[i:], "--"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			b.WriteByte(' ')
		case !inQuote && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return b.String()
			}
			i += end + 3
			b.WriteByte(' ')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func firstWord(s string) string {
	if i := strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }); i >= 0 {
		return s[:i]
	}
	return s
}
