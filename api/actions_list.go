package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
)

// ActionLister lists and counts a tenant's actions; *postgres.DB has it.
// Without it GET /v1/actions and /v1/actions/stats answer 503.
type ActionLister interface {
	ListActions(ctx context.Context, tenantID string, f commitlayer.ActionFilter) (commitlayer.ActionPage, error)
	ActionStats(ctx context.Context, tenantID string, q commitlayer.StatsQuery) ([]commitlayer.StatsRow, error)
}

// List and stats bounds (the store applies the same).
const (
	DefaultListLimit   = 50
	MaxListLimit       = 500
	DefaultStatsBucket = time.Hour
	DefaultStatsWindow = 24 * time.Hour
	MinStatsBucket     = time.Minute
	MaxStatsBuckets    = 2000
	maxFilterValue     = 256
)

// FilterError is a query parameter a list or stats query cannot take.
type FilterError struct {
	Param   string
	Message string
}

func (e *FilterError) Error() string { return e.Param + ": " + e.Message }

func filterErr(param, format string, args ...any) *FilterError {
	return &FilterError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// ListParams are the query parameters GET /v1/actions takes.
var ListParams = []string{"status", "provisional", "contract", "agent", "subject", "since", "until", "limit", "cursor"}

// StatsParams are the query parameters GET /v1/actions/stats takes.
var StatsParams = []string{"bucket", "since", "until", "contract", "agent"}

// ParseActionFilter reads a list's filter (ListParams; others are refused
// so a typo does not silently list everything). The console shares it.
func ParseActionFilter(q url.Values) (commitlayer.ActionFilter, error) {
	var f commitlayer.ActionFilter
	if err := onlyParams(q, ListParams); err != nil {
		return f, err
	}
	switch v := q.Get("status"); strings.ToUpper(v) {
	case "":
	case "PASS", "FAIL", "UNKNOWN":
		f.Status = strings.ToUpper(v)
	case "PENDING":
		f.Status = commitlayer.VerdictPending
	default:
		return f, filterErr("status", "must be PASS, FAIL, UNKNOWN or pending, got %q", commitlayer.Clip(v, 32))
	}
	switch v := q.Get("provisional"); v {
	case "":
	case "true", "false":
		b := v == "true"
		f.Provisional = &b
	default:
		return f, filterErr("provisional", "must be true or false, got %q", commitlayer.Clip(v, 32))
	}
	if err := textParams(q, &f.Contract, &f.Agent); err != nil {
		return f, err
	}
	if v := q.Get("subject"); v != "" {
		s, err := commitlayer.ParseSubject(v)
		if err != nil || !storable(v) {
			return f, filterErr("subject", "must be type:id (e.g. order:o_1001)")
		}
		f.Subject = s
	}
	w, err := parseWindow(q)
	if err != nil {
		return f, err
	}
	// A zero Until would list everything, so an explicit one is refused.
	if w.hasUntil && w.until.IsZero() {
		return f, filterErr("until", "0001-01-01T00:00:00Z leaves nothing before it; give a later time or no until")
	}
	f.Since, f.Until = w.since, w.until
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return f, filterErr("limit", "must be an integer from 1 to %d, got %q", MaxListLimit, commitlayer.Clip(v, 32))
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, err := DecodeCursor(v)
		if err != nil {
			return f, filterErr("cursor", "is not a cursor this list answered; start again without it")
		}
		f.After = &c
	}
	return f, nil
}

// window is a query's since and until, each with whether it was given (an
// explicit year-1 time is not "not given").
type window struct {
	since, until       time.Time
	hasSince, hasUntil bool
}

// parseWindow reads since and until, refusing an until not after since.
func parseWindow(q url.Values) (window, error) {
	var w window
	for _, p := range []struct {
		name string
		dst  *time.Time
		has  *bool
	}{{"since", &w.since, &w.hasSince}, {"until", &w.until, &w.hasUntil}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, perr := parseTime(v)
		if perr != nil {
			return w, filterErr(p.name, "%s", perr.Error())
		}
		if y := t.Year(); y < 1 || y > 9999 {
			return w, filterErr(p.name, "year %d is outside 1 to 9999", y)
		}
		*p.dst, *p.has = t, true
	}
	if w.hasSince && w.hasUntil && !w.until.After(w.since) {
		return w, filterErr("until", "must be after since")
	}
	return w, nil
}

func onlyParams(q url.Values, known []string) error {
	for k := range q {
		if !slices.Contains(known, k) {
			return filterErr(commitlayer.Clip(k, 64), "is not a parameter here; use %s", strings.Join(known, ", "))
		}
	}
	for _, k := range known {
		if len(q[k]) > 1 {
			return filterErr(k, "is given %d times; give it once", len(q[k]))
		}
	}
	return nil
}

// A cursor is opaque to clients: base64url of "1.<requested_at unix µs>.<id>".
const cursorVersion = "1"

// EncodeCursor makes the opaque cursor of a list position.
func EncodeCursor(c commitlayer.ActionCursor) string {
	raw := cursorVersion + "." + strconv.FormatInt(c.RequestedAt.UnixMicro(), 10) + "." + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor reads a cursor EncodeCursor made.
func DecodeCursor(s string) (commitlayer.ActionCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return commitlayer.ActionCursor{}, err
	}
	parts := strings.SplitN(string(b), ".", 3)
	if len(parts) != 3 || parts[0] != cursorVersion || parts[2] == "" || !storable(parts[2]) {
		return commitlayer.ActionCursor{}, fmt.Errorf("malformed cursor")
	}
	us, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return commitlayer.ActionCursor{}, err
	}
	t := time.UnixMicro(us).UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return commitlayer.ActionCursor{}, fmt.Errorf("cursor time out of range")
	}
	return commitlayer.ActionCursor{RequestedAt: t, ID: parts[2]}, nil
}

// ParseStatsQuery reads a stats query (StatsParams); since is rounded down
// to a whole bucket (UTC), so hourly buckets start on the hour.
func ParseStatsQuery(q url.Values, now time.Time) (commitlayer.StatsQuery, error) {
	var sq commitlayer.StatsQuery
	if err := onlyParams(q, StatsParams); err != nil {
		return sq, err
	}
	sq.Bucket = DefaultStatsBucket
	if v := q.Get("bucket"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinStatsBucket {
			return sq, filterErr("bucket", "must be a duration of at least %s (e.g. 1h, 15m), got %q", MinStatsBucket, commitlayer.Clip(v, 32))
		}
		sq.Bucket = d
	}
	w, err := parseWindow(q)
	if err != nil {
		return sq, err
	}
	since, until := w.since, w.until
	if !w.hasUntil {
		until = now.UTC()
	}
	if !w.hasSince {
		if until.Before(time.Time{}.Add(DefaultStatsWindow)) {
			return sq, filterErr("until", "leaves no day before it for the default since; give since")
		}
		since = until.Add(-DefaultStatsWindow)
	}
	if !until.After(since) {
		return sq, filterErr("since", "must be before until (default now)")
	}
	sq.Since, sq.Until = since.Truncate(sq.Bucket), until
	// Counted in microseconds: Time.Sub saturates at 292 years.
	if n := (sq.Until.UnixMicro() - sq.Since.UnixMicro()) / sq.Bucket.Microseconds(); n >= MaxStatsBuckets {
		return sq, filterErr("bucket", "cuts the window into %d buckets; at most %d (use a longer bucket or a shorter window)", n+1, MaxStatsBuckets)
	}
	return sq, textParams(q, &sq.Contract, &sq.Agent)
}

func textParams(q url.Values, contract, agent *string) error {
	*contract, *agent = q.Get("contract"), q.Get("agent")
	for _, name := range []string{"contract", "agent"} {
		if v := q.Get(name); len(v) > maxFilterValue || !storable(v) {
			return filterErr(name, "must be UTF-8 text of at most %d bytes", maxFilterValue)
		}
	}
	return nil
}

func (s *Server) lister() (ActionLister, error) {
	if l, ok := s.store.(ActionLister); ok {
		return l, nil
	}
	return nil, errorf(http.StatusServiceUnavailable, codeUnavailable, "listing actions is not enabled on this server")
}

// listActions answers the tenant's actions, newest first, a page at a time.
func (s *Server) listActions(w http.ResponseWriter, r *http.Request) error {
	l, err := s.lister()
	if err != nil {
		return err
	}
	f, err := ParseActionFilter(r.URL.Query())
	if err != nil {
		return err
	}
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	page, err := l.ListActions(r.Context(), tenantOf(r.Context()).ID, f)
	if err != nil {
		return fmt.Errorf("list actions: %w", err)
	}
	out := client.ActionList{Actions: make([]client.ListedAction, 0, len(page.Actions))}
	for _, it := range page.Actions {
		a := viewAction(it.Action)
		v := client.ListedAction{ID: a.ID, Contract: a.Contract, ContractVersion: a.ContractVersion, Agent: a.Agent,
			Subject: a.Subject, Params: a.Params, RequestedAt: a.RequestedAt, Claim: a.Claim,
			SettlesAt: a.SettlesAt, WatchUntil: a.WatchUntil, CreatedAt: a.CreatedAt, Status: commitlayer.VerdictPending,
			Verification: it.Action.Verification(), VerificationError: it.Action.VerificationError}
		if it.Verdict != nil {
			vv := viewVerdict(*it.Verdict)
			v.Verdict, v.Status = &vv, string(vv.Status)
			v.Verification = commitlayer.VerificationStarted
		}
		out.Actions = append(out.Actions, v)
	}
	if page.Next != nil {
		c := EncodeCursor(*page.Next)
		out.NextCursor = &c
	}
	return writeJSON(w, http.StatusOK, out)
}

// actionStats counts the tenant's actions by current verdict per bucket,
// contract and agent; empty buckets are left out.
func (s *Server) actionStats(w http.ResponseWriter, r *http.Request) error {
	l, err := s.lister()
	if err != nil {
		return err
	}
	q, err := ParseStatsQuery(r.URL.Query(), s.now())
	if err != nil {
		return err
	}
	rows, err := l.ActionStats(r.Context(), tenantOf(r.Context()).ID, q)
	if err != nil {
		return fmt.Errorf("action stats: %w", err)
	}
	out := client.ActionStats{Bucket: q.Bucket.String(), Since: q.Since, Until: q.Until, Buckets: make([]client.StatsBucket, 0, len(rows))}
	for _, row := range rows {
		out.Buckets = append(out.Buckets, client.StatsBucket{Start: row.Start, Contract: row.Contract, Agent: row.Agent, Counts: row.Counts})
		out.Totals.Add(row.Counts)
	}
	return writeJSON(w, http.StatusOK, out)
}
