package oracle

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer/sandbox/agent"
)

// Reading the systems' files: the helpers every process's rules use.

type event struct {
	Seq   int64
	Type  string
	At    time.Time
	Attrs map[string]any
}

func (e event) str(k string) string {
	s, _ := e.Attrs[k].(string)
	return s
}

// eventsAfter returns the events of the given types on subject that occurred
// after t (strictly), in order.
func (j *reading) eventsAfter(system, subject string, t time.Time, types ...string) ([]event, error) {
	db := j.o.dbs[system]
	q := `SELECT seq, type, occurred_at, attrs FROM events WHERE subject = ? AND type IN (` +
		strings.TrimSuffix(strings.Repeat("?,", len(types)), ",") + `) ORDER BY seq`
	args := []any{subject}
	for _, ty := range types {
		args = append(args, ty)
	}
	rows, err := db.QueryContext(j.ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s events: %w", system, err)
	}
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		var at, attrs string
		if err := rows.Scan(&e.Seq, &e.Type, &at, &attrs); err != nil {
			return nil, fmt.Errorf("read %s events: %w", system, err)
		}
		if e.At, err = time.Parse(time.RFC3339, at); err != nil {
			return nil, fmt.Errorf("read %s event %d: occurred_at: %w", system, e.Seq, err)
		}
		dec := json.NewDecoder(strings.NewReader(attrs))
		dec.UseNumber()
		if err := dec.Decode(&e.Attrs); err != nil {
			return nil, fmt.Errorf("read %s event %d: attrs: %w", system, e.Seq, err)
		}
		if e.At.After(t) {
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s events: %w", system, err)
	}
	return out, nil
}

// statusAt is a record's status at t: the "previous" of its first status
// change after t, or its current status when it has not changed since.
func (j *reading) statusAt(system, subject, changeType, current string, t time.Time) (string, error) {
	evs, err := j.eventsAfter(system, subject, t, changeType)
	if err != nil {
		return "", err
	}
	if len(evs) > 0 {
		if p := evs[0].str("previous"); p != "" {
			return p, nil
		}
	}
	return current, nil
}

// row scans one row; found is false when there is none.
func (j *reading) row(system, q string, args []any, dest ...any) (bool, error) {
	err := j.o.dbs[system].QueryRowContext(j.ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", system, err)
	}
	return true, nil
}

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339, s) }

// after reports whether the stored time s is strictly after t.
func after(s string, t time.Time) bool {
	at, err := parseTime(s)
	return err == nil && at.After(t)
}

// notesAfter counts notes created after t on tickets about subject.
func (j *reading) notesAfter(about string, t time.Time) (int, error) {
	rows, err := j.o.dbs["tickets"].QueryContext(j.ctx,
		`SELECT n.created_at FROM notes n JOIN tickets t ON t.id = n.ticket_id WHERE t.about = ?`, about)
	if err != nil {
		return 0, fmt.Errorf("read notes: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var at string
		if err := rows.Scan(&at); err != nil {
			return 0, fmt.Errorf("read notes: %w", err)
		}
		if after(at, t) {
			n++
		}
	}
	return n, rows.Err()
}

// window returns this agent's earlier actions of the same process within
// the limit window, each with the end of its span (the next action's
// requested_at, in any process, or this action's).
func (j *reading) window() []struct {
	Action
	End time.Time
} {
	all := append([]Action{}, j.in.Prior...)
	all = append(all, j.in.Action)
	starts := make([]time.Time, 0, len(all))
	for _, a := range all {
		starts = append(starts, a.RequestedAt.UTC().Truncate(time.Second))
	}
	sort.Slice(starts, func(a, b int) bool { return starts[a].Before(starts[b]) })
	var out []struct {
		Action
		End time.Time
	}
	for _, p := range j.in.Prior {
		at := p.RequestedAt.UTC().Truncate(time.Second)
		if p.Task.AgentID != j.in.Task.AgentID || p.Task.Process != j.in.Task.Process ||
			!at.Before(j.req) || !at.After(j.req.Add(-Window)) {
			continue
		}
		end := j.req
		for _, s := range starts {
			if s.After(at) {
				end = s
				break
			}
		}
		out = append(out, struct {
			Action
			End time.Time
		}{p, end})
	}
	return out
}

func intParam(t agent.Task, name string) (int64, bool) {
	switch v := t.Params[name].(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case float64:
		if v == float64(int64(v)) {
			return int64(v), true
		}
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}

func strParam(t agent.Task, name string) string {
	s, _ := t.Params[name].(string)
	return s
}

// between reports whether the stored time s is in (from, to].
func between(s string, from, to time.Time) bool {
	at, err := parseTime(s)
	return err == nil && at.After(from) && !at.After(to)
}

// statusChangesTo counts the status changes of subject to status after the
// action started.
func (j *reading) statusChangesTo(system, subject, typ, status string) (int, error) {
	evs, err := j.eventsAfter(system, subject, j.req, typ)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range evs {
		if e.str("status") == status {
			n++
		}
	}
	return n, nil
}

func (j *reading) requireNote(about string) error {
	n, err := j.notesAfter(about, j.req)
	if err != nil {
		return err
	}
	if n == 0 {
		j.failOutcome("tickets", "customer_notified", "no note on a ticket about %s", about)
	}
	return nil
}

func (j *reading) refundsAfter(orderID string) (int, error) {
	rows, err := j.o.dbs["payments"].QueryContext(j.ctx, `SELECT created_at FROM refunds WHERE order_id = ?`, orderID)
	if err != nil {
		return 0, fmt.Errorf("read refunds: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var at string
		if err := rows.Scan(&at); err != nil {
			return 0, fmt.Errorf("read refunds: %w", err)
		}
		if after(at, j.req) {
			n++
		}
	}
	return n, rows.Err()
}

// farFuture bounds a read of everything after a time.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
