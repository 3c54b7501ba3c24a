// Package systems holds the sandbox enterprise's seven systems of record
// (payments, orders, crm, tickets, ledger, platform, broker). Each system owns
// one SQLite file, answers its HTTP routes, honours Idempotency-Key on every
// write, and appends the events of each state change to its event log in the
// same transaction. docs/sandbox-vocabulary.md is the agreed vocabulary and
// docs/sandbox-schema.md the tables.
package systems

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// System names.
const (
	Payments = "payments"
	Orders   = "orders"
	CRM      = "crm"
	Tickets  = "tickets"
	Ledger   = "ledger"
	Platform = "platform"
	Broker   = "broker"
)

// Names lists the seven systems in a fixed order.
var Names = []string{Payments, Orders, CRM, Tickets, Ledger, Platform, Broker}

// schemaVersion is stored in every file's meta table.
const schemaVersion = "1"

const commonSchema = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (
	seq INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	type TEXT NOT NULL,
	subject TEXT NOT NULL,
	occurred_at TEXT NOT NULL,
	attrs TEXT NOT NULL,
	links TEXT NOT NULL
);
CREATE TABLE idempotency_keys (
	key TEXT PRIMARY KEY,
	fingerprint TEXT NOT NULL,
	method TEXT NOT NULL,
	path TEXT NOT NULL,
	status INTEGER NOT NULL,
	body TEXT NOT NULL,
	created_at TEXT NOT NULL
);
`

// schemas holds each system's own tables (docs/sandbox-schema.md).
var schemas = map[string]string{
	Payments: paymentsSchema,
	Orders:   ordersSchema,
	CRM:      crmSchema,
	Tickets:  ticketsSchema,
	Ledger:   ledgerSchema,
	Platform: platformSchema,
	Broker:   brokerSchema,
}

// TimeFormat is how times are stored and sent: RFC 3339, UTC, seconds.
const TimeFormat = time.RFC3339

func fmtTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// System is one system of record's SQLite file, write lock and clock. The
// concrete systems (PaymentsSystem, OrdersSystem, …) embed it.
type System struct {
	name  string
	path  string
	db    *sql.DB
	clock *Clock
	// mu serializes writes, so idempotency checks, id counters and event
	// sequence numbers never race.
	mu sync.Mutex
}

// Name is the system's name ("payments").
func (s *System) Name() string { return s.name }

// Path is the SQLite file.
func (s *System) Path() string { return s.path }

// DB is the system's database handle (for reads and tests).
func (s *System) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *System) Close() error { return s.db.Close() }

func dsn(path string) string {
	// synchronous(OFF): the sandbox's files must survive a process, not a
	// power cut, and fsyncs were most of the cost of creating an enterprise.
	// WAL is persistent in the file: Create switches to it once.
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=synchronous(OFF)&_txlock=immediate"
}

// Create makes a new SQLite file for system name at path, with the common
// and the system's tables and the clock's meta rows. The file must not exist.
func Create(ctx context.Context, name, path string, clock *Clock) (*System, error) {
	schema, ok := schemas[name]
	if !ok {
		return nil, fmt.Errorf("create system %q: unknown system", name)
	}
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("create system %q: %s already exists", name, path)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("create system %q: %w", name, err)
	}
	s := &System{name: name, path: path, db: db, clock: clock}
	err = func() error {
		// Switch to WAL on a connection already at synchronous=OFF (the
		// driver applies DSN pragmas in name order, journal_mode first).
		var mode string
		if err := db.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode); err != nil {
			return err
		}
		if mode != "wal" {
			return fmt.Errorf("journal mode is %q, not wal", mode)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, commonSchema+schema); err != nil {
			return err
		}
		start := fmtTime(clock.Start())
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO meta(key, value) VALUES ('system', ?), ('schema_version', ?), ('clock_start', ?), ('clock', ?)`,
			name, schemaVersion, start, fmtTime(clock.Last())); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("create system %q: %w", name, err)
	}
	return s, nil
}

// Tx is one write to a system: a SQLite transaction plus the virtual time of
// the write and the events it appends.
type Tx struct {
	ctx  context.Context
	tx   *sql.Tx
	sys  *System
	at   time.Time // zero until the write first asks for its time
	done bool
}

// Ctx is the context of the write.
func (t *Tx) Ctx() context.Context { return t.ctx }

// Now is the virtual time of this write: the clock advances one second the
// first time a write asks for it, and every event of the write carries it.
func (t *Tx) Now() time.Time {
	if t.at.IsZero() {
		t.at = t.sys.clock.reserve()
	}
	return t.at
}

// Exec runs a statement in the write.
func (t *Tx) Exec(query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(t.ctx, query, args...)
}

// QueryRow runs a query returning one row in the write.
func (t *Tx) QueryRow(query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(t.ctx, query, args...)
}

// NextID returns prefix followed by one more than the rows in table
// ("re_3" when refunds holds two rows). Rows are never deleted and writes
// are serialized, so ids are unique and deterministic.
func (t *Tx) NextID(prefix, table string) (string, error) {
	var n int64
	if err := t.tx.QueryRowContext(t.ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		return "", fmt.Errorf("next id in %s: %w", table, err)
	}
	return prefix + strconv.FormatInt(n+1, 10), nil
}

// Emit appends an event stamped with the write's time.
func (t *Tx) Emit(typ, subject string, attrs map[string]any, links ...string) error {
	return t.emitAt(t.Now(), typ, subject, attrs, links)
}

func (t *Tx) emitAt(at time.Time, typ, subject string, attrs map[string]any, links []string) error {
	var seq int64
	if err := t.tx.QueryRowContext(t.ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM events`).Scan(&seq); err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	if attrs == nil {
		attrs = map[string]any{}
	}
	if links == nil {
		links = []string{}
	}
	a, err := json.Marshal(attrs)
	if err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	l, err := json.Marshal(links)
	if err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	id := t.sys.name + "-" + strconv.FormatInt(seq, 10)
	if _, err := t.tx.ExecContext(t.ctx,
		`INSERT INTO events(seq, id, type, subject, occurred_at, attrs, links) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		seq, id, typ, subject, fmtTime(at), string(a), string(l)); err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	return nil
}

// commit records the clock (when the write took a time) and commits; the
// clock advances only when the commit succeeds.
func (t *Tx) commit() error {
	if !t.at.IsZero() {
		if _, err := t.tx.ExecContext(t.ctx, `UPDATE meta SET value = ? WHERE key = 'clock'`, fmtTime(t.at)); err != nil {
			t.rollback()
			return fmt.Errorf("store clock: %w", err)
		}
	}
	if err := t.tx.Commit(); err != nil {
		t.rollback()
		return err
	}
	t.done = true
	if !t.at.IsZero() {
		t.sys.clock.advance(t.at)
	}
	return nil
}

// rollback abandons the write (a no-op after commit or a first rollback).
func (t *Tx) rollback() {
	if t.done {
		return
	}
	t.done = true
	t.tx.Rollback()
	if !t.at.IsZero() {
		t.sys.clock.release()
	}
}

// begin starts a write; the caller holds s.mu.
func (s *System) begin(ctx context.Context) (*Tx, error) {
	if s.clock == nil {
		return nil, errors.New("system has no clock")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &Tx{ctx: ctx, tx: tx, sys: s}, nil
}

// Write runs fn as one write: under the system's write lock, in one
// transaction that commits only when fn returns nil. Events emitted by fn
// are committed with its state changes or not at all.
func (s *System) Write(ctx context.Context, fn func(tx *Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("%s write: %w", s.name, err)
	}
	defer tx.rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.commit(); err != nil {
		return fmt.Errorf("%s write: %w", s.name, err)
	}
	return nil
}

// Seeder stamps seeded records: each call returns the next second from a
// base, so seeded events are ordered, deterministic and before the clock's
// start.
type Seeder struct {
	next time.Time
}

// NewSeeder stamps from base on.
func NewSeeder(base time.Time) *Seeder { return &Seeder{next: base.UTC().Truncate(time.Second)} }

// Stamp returns the next seed time.
func (s *Seeder) Stamp() time.Time {
	t := s.next
	s.next = s.next.Add(time.Second)
	return t
}

// seed runs fn in one transaction without taking a time from the clock;
// seeded rows and events carry times from the Seeder.
func (s *System) seed(ctx context.Context, fn func(tx *Tx) error) error {
	if err := s.Write(ctx, fn); err != nil {
		return fmt.Errorf("seed %s: %w", s.name, err)
	}
	return nil
}
