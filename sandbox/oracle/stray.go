package oracle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// effectKind is a kind of event a workflow's task produces or forbids: a
// system's event type, optionally only with one of the given values of an
// attr.
type effectKind struct {
	system, typ string
	attr        string
	values      []string
}

// strayKinds are, per workflow, the effects its task produces or forbids
// (the same business rules as Judge, written from the sandbox vocabulary).
var strayKinds = map[string][]effectKind{
	"refund": {
		{system: "payments", typ: "refund_created"},
		{system: "orders", typ: "order_status_changed", attr: "status", values: []string{"refunded", "cancelled"}},
		{system: "tickets", typ: "note_added"},
	},
	"cancel": {
		{system: "crm", typ: "subscription_status_changed", attr: "status", values: []string{"cancelled"}},
		{system: "payments", typ: "billing_stopped"},
		{system: "tickets", typ: "note_added"},
		{system: "payments", typ: "refund_created"}, // cancelling is not refunding
	},
	"address": {
		{system: "orders", typ: "address_changed"},
		{system: "orders", typ: "order_status_changed", attr: "status", values: []string{"cancelled"}},
		{system: "tickets", typ: "note_added"},
	},
	"discount": {
		{system: "orders", typ: "discount_applied"},
		{system: "tickets", typ: "note_added"},
		{system: "payments", typ: "refund_created"}, // a discount is not a refund
	},
	"close": {
		{system: "tickets", typ: "note_added"},
		{system: "tickets", typ: "ticket_status_changed"},
	},
	"payout": {
		{system: "ledger", typ: "payout_sent"},
	},
	"deploy": {
		{system: "platform", typ: "deployed"},
		{system: "platform", typ: "health_reported"},
	},
	"trade": {
		{system: "broker", typ: "order_placed"},
		{system: "broker", typ: "order_filled"},
	},
}

// Stray lists the subjects that got an effect of a kind the workflow's task
// produces or forbids at or after since, although no recorded action was
// about them: the truth behind CommitLayer's orphans. An effect counts as
// recorded when its subject, or a subject its event links to, is recorded;
// an effect on a ticket also when the ticket is about a recorded subject
// (a note on the ticket of a recorded order). The list is sorted, each
// subject once.
func (o *Oracle) Stray(ctx context.Context, workflow string, recorded []commitlayer.Subject, since time.Time) ([]commitlayer.Subject, error) {
	kinds, ok := strayKinds[workflow]
	if !ok {
		return nil, fmt.Errorf("stray effects: unknown workflow %q", workflow)
	}
	if since.IsZero() {
		return nil, errors.New("stray effects: since is required")
	}
	rec := map[string]bool{}
	for _, s := range recorded {
		if _, err := commitlayer.ParseSubject(string(s)); err != nil {
			return nil, fmt.Errorf("stray effects: recorded %w", err)
		}
		rec[string(s)] = true
	}
	abouts, err := o.ticketAbouts(ctx)
	if err != nil {
		return nil, fmt.Errorf("stray effects: %w", err)
	}
	seen := map[string]bool{}
	out := []commitlayer.Subject{}
	for _, k := range kinds {
		evs, err := o.effectEvents(ctx, k, since)
		if err != nil {
			return nil, fmt.Errorf("stray effects: %w", err)
		}
		for _, ev := range evs {
			covered := rec[ev.subject] || rec[abouts[ev.subject]]
			for _, l := range ev.links {
				covered = covered || rec[l]
			}
			if !covered && !seen[ev.subject] {
				seen[ev.subject] = true
				out = append(out, commitlayer.Subject(ev.subject))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

type effectEvent struct {
	subject string
	links   []string
}

// effectEvents reads the events of kind k that occurred at or after since.
func (o *Oracle) effectEvents(ctx context.Context, k effectKind, since time.Time) ([]effectEvent, error) {
	db, ok := o.dbs[k.system]
	if !ok {
		return nil, fmt.Errorf("no file for system %s", k.system)
	}
	rows, err := db.QueryContext(ctx, `SELECT seq, subject, occurred_at, attrs, links FROM events WHERE type = ? ORDER BY seq`, k.typ)
	if err != nil {
		return nil, fmt.Errorf("read %s events: %w", k.system, err)
	}
	defer rows.Close()
	var out []effectEvent
	for rows.Next() {
		var seq int64
		var subject, at, attrs, links string
		if err := rows.Scan(&seq, &subject, &at, &attrs, &links); err != nil {
			return nil, fmt.Errorf("read %s events: %w", k.system, err)
		}
		t, err := parseTime(at)
		if err != nil {
			return nil, fmt.Errorf("read %s event %d: occurred_at: %w", k.system, seq, err)
		}
		if t.Before(since) {
			continue
		}
		if k.attr != "" {
			var a map[string]any
			if err := json.NewDecoder(strings.NewReader(attrs)).Decode(&a); err != nil {
				return nil, fmt.Errorf("read %s event %d: attrs: %w", k.system, seq, err)
			}
			if v, _ := a[k.attr].(string); !slices.Contains(k.values, v) {
				continue
			}
		}
		ev := effectEvent{subject: subject}
		if err := json.Unmarshal([]byte(links), &ev.links); err != nil {
			return nil, fmt.Errorf("read %s event %d: links: %w", k.system, seq, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s events: %w", k.system, err)
	}
	return out, nil
}

// ticketAbouts maps each ticket subject ("ticket:t_1") to what it is about
// ("order:o_1001").
func (o *Oracle) ticketAbouts(ctx context.Context) (map[string]string, error) {
	rows, err := o.dbs["tickets"].QueryContext(ctx, `SELECT id, about FROM tickets`)
	if err != nil {
		return nil, fmt.Errorf("read tickets: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, about string
		if err := rows.Scan(&id, &about); err != nil {
			return nil, fmt.Errorf("read tickets: %w", err)
		}
		out["ticket:"+id] = about
	}
	return out, rows.Err()
}
