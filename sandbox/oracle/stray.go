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
	"github.com/commitlayer/commitlayer/sandbox/business"
)

// Stray lists the subjects that got an effect of a kind the business
// process's task produces or forbids (its registry entry's Effects) at or
// after since, although no recorded action was about them: the truth
// behind CommitLayer's orphans. An effect counts as
// recorded when its subject, or a subject its event links to, is recorded;
// an effect on a ticket also when the ticket is about a recorded subject
// (a note on the ticket of a recorded order). The list is sorted, each
// subject once.
func (o *Oracle) Stray(ctx context.Context, process string, recorded []commitlayer.Subject, since time.Time) ([]commitlayer.Subject, error) {
	p, ok := business.Lookup(process)
	if !ok {
		return nil, fmt.Errorf("stray effects: unknown process %q", process)
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
	for _, k := range p.Effects {
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
func (o *Oracle) effectEvents(ctx context.Context, k business.Effect, since time.Time) ([]effectEvent, error) {
	db, ok := o.dbs[k.System]
	if !ok {
		return nil, fmt.Errorf("no file for system %s", k.System)
	}
	rows, err := db.QueryContext(ctx, `SELECT seq, subject, occurred_at, attrs, links FROM events WHERE type = ? ORDER BY seq`, k.Type)
	if err != nil {
		return nil, fmt.Errorf("read %s events: %w", k.System, err)
	}
	defer rows.Close()
	var out []effectEvent
	for rows.Next() {
		var seq int64
		var subject, at, attrs, links string
		if err := rows.Scan(&seq, &subject, &at, &attrs, &links); err != nil {
			return nil, fmt.Errorf("read %s events: %w", k.System, err)
		}
		t, err := parseTime(at)
		if err != nil {
			return nil, fmt.Errorf("read %s event %d: occurred_at: %w", k.System, seq, err)
		}
		if t.Before(since) {
			continue
		}
		if k.Attr != "" {
			var a map[string]any
			if err := json.NewDecoder(strings.NewReader(attrs)).Decode(&a); err != nil {
				return nil, fmt.Errorf("read %s event %d: attrs: %w", k.System, seq, err)
			}
			if v, _ := a[k.Attr].(string); !slices.Contains(k.Values, v) {
				continue
			}
		}
		ev := effectEvent{subject: subject}
		if err := json.Unmarshal([]byte(links), &ev.links); err != nil {
			return nil, fmt.Errorf("read %s event %d: links: %w", k.System, seq, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s events: %w", k.System, err)
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
