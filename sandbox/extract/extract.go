// Package extract pulls the sandbox systems' event feeds over HTTP with the
// http_events connector, the way CommitLayer reads a customer's systems: one
// cursor per system, facts with links derived from ticket events, and a
// report of every system it could not reach.
package extract

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/httpevents"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// Report is what one pull brought back.
type Report struct {
	// Facts read in this pull, system by system in Systems order, each in
	// feed order.
	Facts []commitlayer.Fact
	// Unreachable maps each system that could not be read completely to
	// the error; facts read from it before the error are in Facts.
	Unreachable map[string]string
	// Cursors are the cursors after this pull, per system.
	Cursors map[string]int64
}

// Connected lists the systems that have reported at least one fact to
// this extractor, in any pull so far, sorted.
func (x *Extractor) Connected() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.reported))
	for s := range x.reported {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Extractor pulls the systems' feeds. It keeps its cursors between pulls,
// so a later pull continues where the last one stopped. It is safe for
// concurrent use; pulls are serialized.
type Extractor struct {
	// BaseURL is the enterprise's URL; a system's feed is at
	// BaseURL/{system}/events.
	BaseURL string
	// HTTP is the client (its transport may be a chaos transport).
	HTTP *http.Client
	// Systems to pull; nil means all seven.
	Systems []string
	// MaxPages bounds the pages read per system per pull (0: 100).
	MaxPages int
	// Query names systems read through the http_json query connector
	// (QueryConfig) instead of the http_events feed connector.
	Query []string

	mu       sync.Mutex
	cursors  map[string]int64
	about    map[string][]commitlayer.Subject // ticket id → subjects it is about
	reported map[string]bool
}

// New returns an extractor for the enterprise at baseURL using hc (nil: a
// client with a 10 s timeout).
func New(baseURL string, hc *http.Client) *Extractor {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Extractor{BaseURL: baseURL, HTTP: hc}
}

// Cursors returns a copy of the current cursors.
func (x *Extractor) Cursors() map[string]int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return copyCursors(x.cursors)
}

func copyCursors(c map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// Pull reads every system's feed from its cursor to the end. A system that
// fails is in Report.Unreachable and keeps the cursor of what was read. The
// error is only for a cancelled context.
func (x *Extractor) Pull(ctx context.Context) (Report, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cursors == nil {
		x.cursors = map[string]int64{}
		x.about = map[string][]commitlayer.Subject{}
		x.reported = map[string]bool{}
	}
	names := x.Systems
	if names == nil {
		names = systems.Names
	}
	rep := Report{Facts: []commitlayer.Fact{}, Unreachable: map[string]string{}}
	base := strings.TrimRight(x.BaseURL, "/")
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return Report{}, fmt.Errorf("extract: %w", err)
		}
		var page commitlayer.FactPage
		var next int64
		var err error
		if slices.Contains(x.Query, name) {
			page, next, err = x.pullQuery(ctx, base, name)
		} else {
			c := httpevents.Client{HTTP: x.HTTP, BaseURL: base + "/" + name}
			var p httpevents.Page
			p, err = c.PullAll(ctx, name, x.cursors[name], x.MaxPages)
			page, next = commitlayer.FactPage{Facts: p.Facts, More: p.More}, p.Next
		}
		if err == nil && page.More {
			err = fmt.Errorf("pull %s: stopped after %d pages with more to read", name, x.maxPages())
		}
		if err != nil {
			rep.Unreachable[name] = err.Error()
		}
		for i := range page.Facts {
			x.link(&page.Facts[i])
		}
		if len(page.Facts) > 0 {
			x.reported[name] = true
		}
		rep.Facts = append(rep.Facts, page.Facts...)
		x.cursors[name] = next
	}
	if err := ctx.Err(); err != nil {
		return Report{}, fmt.Errorf("extract: %w", err)
	}
	rep.Cursors = copyCursors(x.cursors)
	return rep, nil
}

func (x *Extractor) maxPages() int {
	if x.MaxPages <= 0 {
		return 100
	}
	return x.MaxPages
}

// link derives a ticket fact's links from the ticket's events: a ticket is
// about an order or a subscription and belongs to a customer (its
// ticket_opened attrs), so every fact on the ticket links to both, even when
// the feed sent the event without links.
func (x *Extractor) link(f *commitlayer.Fact) {
	if f.Subject.Type() != "ticket" {
		return
	}
	id := f.Subject.ID()
	var derived []commitlayer.Subject
	if about, ok := f.Attrs["about"].(string); ok {
		if s, err := commitlayer.ParseSubject(about); err == nil {
			derived = append(derived, s)
		}
	}
	if cust, ok := f.Attrs["customer_id"].(string); ok && cust != "" {
		if s, err := commitlayer.ParseSubject("customer:" + cust); err == nil {
			derived = append(derived, s)
		}
	}
	if len(derived) > 0 {
		x.about[id] = mergeLinks(x.about[id], derived)
	}
	// Links the feed sent count as what the ticket is about too.
	x.about[id] = mergeLinks(x.about[id], f.Links)
	f.Links = mergeLinks(f.Links, x.about[id])
}

func mergeLinks(a, b []commitlayer.Subject) []commitlayer.Subject {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
