package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/api"
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// ---- login ----

type loginData struct {
	Next string
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if se, err := c.sessionOf(r); err == nil && se != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", page{Title: "Log in", Data: loginData{Next: next}})
}

// login checks the key and starts a session. The key is read from the
// form and passed to the store; it is not logged, echoed or kept. Each
// attempt is counted against the client's address before the key is
// checked (one statement, so a burst cannot slip past the limit) and
// taken back when the key is right: only wrong keys use up an address's
// LoginFailures a minute. A tenant may log in TenantLogins times a minute.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		c.render(w, r, http.StatusBadRequest, "login", page{Title: "Log in", Problem: "The form could not be read.", Data: loginData{Next: Prefix}})
		return
	}
	next := localPath(r.PostFormValue("next"))
	problem := func(status int, msg string) {
		c.render(w, r, status, "login", page{Title: "Log in", Problem: msg, Data: loginData{Next: next}})
	}
	tooMany := func(until time.Time, who string) {
		secs := api.RetryAfter(until.Sub(c.now()))
		w.Header().Set("Retry-After", secs)
		problem(http.StatusTooManyRequests, fmt.Sprintf("Too many %s; try again in %ss.", who, secs))
	}
	if !sameOrigin(r) {
		problem(http.StatusForbidden, "This login came from another site.")
		return
	}
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	if key == "" {
		problem(http.StatusBadRequest, "Enter your tenant's API key.")
		return
	}
	ctx, ip, now := r.Context(), api.ClientAddr(r), c.now()
	addrKey := "login:" + api.LimitAddr(r)
	n, until, err := c.cfg.Store.Hit(ctx, addrKey, time.Minute, now)
	if err != nil {
		c.fail(w, r, fmt.Errorf("count login: %w", err))
		return
	}
	if n > c.cfg.LoginFailures {
		tooMany(until, "wrong keys from your address")
		return
	}
	t, err := c.cfg.Store.TenantByAPIKey(ctx, key)
	switch {
	case errors.Is(err, commitlayer.ErrNotFound):
		c.log.InfoContext(ctx, "console: wrong key", "client", ip)
		problem(http.StatusUnauthorized, "That key is not a tenant's API key.")
		return
	case err != nil:
		c.fail(w, r, fmt.Errorf("check key: %w", err))
		return
	}
	if err := c.cfg.Store.Unhit(ctx, addrKey, until); err != nil {
		c.fail(w, r, fmt.Errorf("count login: %w", err))
		return
	}
	if n, until, err := c.cfg.Store.Hit(ctx, "login-tenant:"+t.ID, time.Minute, now); err != nil {
		c.fail(w, r, fmt.Errorf("count login: %w", err))
		return
	} else if n > c.cfg.TenantLogins {
		tooMany(until, "logins for this tenant")
		return
	}
	id := token()
	if err := c.cfg.Store.CreateSession(ctx, t.ID, id, now, now.Add(c.cfg.SessionIdle), now.Add(c.cfg.SessionMax), c.cfg.TenantSessions); err != nil {
		c.fail(w, r, fmt.Errorf("start session: %w", err))
		return
	}
	c.setSessionCookie(w, r, id)
	c.log.InfoContext(ctx, "console: login", "tenant", t.ID, "client", ip)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session for every API process.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if ck, err := r.Cookie(CookieName); err == nil {
		if err := c.cfg.Store.DeleteSession(r.Context(), ck.Value); err != nil {
			c.fail(w, r, fmt.Errorf("end session: %w", err))
			return
		}
	}
	c.setSessionCookie(w, r, "")
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// ---- overview ----

type window struct {
	Name   string
	Span   time.Duration
	Bucket time.Duration
}

var windows = []window{{"24h", 24 * time.Hour, time.Hour}, {"7d", 7 * 24 * time.Hour, 6 * time.Hour}, {"30d", 30 * 24 * time.Hour, 24 * time.Hour}}

type groupRow struct {
	Contract, Agent string
	Counts          commitlayer.StatusCounts
}

type orphanRow struct {
	Contract, Check string
	Fact            commitlayer.Fact
}

type overviewData struct {
	Window    string
	Windows   []window
	Contract  string
	Agent     string
	Contracts []string
	Agents    []string
	Chart     chart
	Groups    []groupRow
	Totals    commitlayer.StatusCounts
	Fails     []actionRow
	Open      []actionRow
	Pending   []actionRow
	Orphans   []orphanRow
	OrphanErr []string
	Sources   []commitlayer.SourceCoverage
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, se *session) {
	ctx, tid, q := r.Context(), se.tenant.ID, r.URL.Query()
	d := overviewData{Windows: windows, Window: "24h", Contract: q.Get("contract"), Agent: q.Get("agent")}
	win := windows[0]
	for _, wn := range windows {
		if wn.Name == q.Get("window") {
			win, d.Window = wn, wn.Name
		}
	}
	if len(d.Contract) > 256 || len(d.Agent) > 256 {
		d.Contract, d.Agent = "", ""
	}
	now := c.now().UTC()
	sq := commitlayer.StatsQuery{Bucket: win.Bucket, Since: now.Add(-win.Span).Truncate(win.Bucket), Until: now.Add(time.Second),
		Contract: d.Contract, Agent: d.Agent}
	rows, err := c.cfg.Store.ActionStats(ctx, tid, sq)
	if err != nil {
		c.fail(w, r, fmt.Errorf("stats: %w", err))
		return
	}
	// Every contract and agent of the window, for the chart's selectors
	// (from an unfiltered count when filtered).
	all := rows
	if d.Contract != "" || d.Agent != "" {
		if all, err = c.cfg.Store.ActionStats(ctx, tid, commitlayer.StatsQuery{Bucket: win.Bucket, Since: sq.Since, Until: sq.Until}); err != nil {
			c.fail(w, r, fmt.Errorf("stats: %w", err))
			return
		}
	}
	for _, row := range all {
		if !slices.Contains(d.Contracts, row.Contract) {
			d.Contracts = append(d.Contracts, row.Contract)
		}
		if !slices.Contains(d.Agents, row.Agent) {
			d.Agents = append(d.Agents, row.Agent)
		}
	}
	sort.Strings(d.Contracts)
	sort.Strings(d.Agents)
	d.Chart = buildChart(rows, sq.Since, sq.Until, win.Bucket)
	groups := map[[2]string]*groupRow{}
	for _, row := range rows {
		k := [2]string{row.Contract, row.Agent}
		if groups[k] == nil {
			groups[k] = &groupRow{Contract: row.Contract, Agent: row.Agent}
		}
		groups[k].Counts.Add(row.Counts)
		d.Totals.Add(row.Counts)
	}
	for _, g := range groups {
		d.Groups = append(d.Groups, *g)
	}
	sort.Slice(d.Groups, func(i, j int) bool {
		a, b := d.Groups[i], d.Groups[j]
		return a.Contract < b.Contract || a.Contract == b.Contract && a.Agent < b.Agent
	})
	yes := true
	for _, l := range []struct {
		f   commitlayer.ActionFilter
		dst *[]actionRow
	}{
		{commitlayer.ActionFilter{Status: string(commitlayer.StatusFail), Limit: 10}, &d.Fails},
		{commitlayer.ActionFilter{Provisional: &yes, Limit: 10}, &d.Open},
		{commitlayer.ActionFilter{Status: commitlayer.VerdictPending, Limit: 10}, &d.Pending},
	} {
		p, err := c.cfg.Store.ListActions(ctx, tid, l.f)
		if err != nil {
			c.fail(w, r, fmt.Errorf("list actions: %w", err))
			return
		}
		*l.dst = actionRows(p.Actions)
	}
	if d.Sources, err = c.cfg.Store.Sources(ctx, tid); err != nil {
		c.fail(w, r, fmt.Errorf("sources: %w", err))
		return
	}
	if c.cfg.Orphans != nil {
		d.Orphans, d.OrphanErr = c.orphans(ctx, tid, now)
	}
	c.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Tenant: se.tenant.Name, CSRF: se.csrf, Data: d})
}

// orphans lists the orphan effects of every contract over the last week
// (at most 20 shown); a contract that cannot be scanned is named, the
// page still renders.
func (c *Console) orphans(ctx context.Context, tid string, now time.Time) ([]orphanRow, []string) {
	recs, err := c.cfg.Store.ListContracts(ctx, tid)
	if err != nil {
		c.log.WarnContext(ctx, "console: orphans: list contracts", "err", err)
		return nil, []string{"contracts could not be listed"}
	}
	var out []orphanRow
	var problems []string
	for i, rec := range recs {
		if i >= 50 || len(out) >= 20 {
			break
		}
		os, err := c.cfg.Orphans.Orphans(ctx, tid, rec.ID, now.Add(-orphanWindow), now)
		if err != nil {
			c.log.WarnContext(ctx, "console: orphans", "contract", rec.ID, "err", err)
			problems = append(problems, rec.ID)
			continue
		}
		for _, o := range os {
			if len(out) < 20 {
				out = append(out, orphanRow{Contract: o.Contract, Check: o.Check, Fact: o.Fact})
			}
		}
	}
	return out, problems
}

// ---- actions ----

type actionRow struct {
	ID, Contract, Agent string
	Subject             commitlayer.Subject
	RequestedAt         time.Time
	Claim               commitlayer.Claim
	Status              string
	Provisional         bool
	Version             int
}

func actionRows(items []commitlayer.ActionListItem) []actionRow {
	out := make([]actionRow, 0, len(items))
	for _, it := range items {
		a := it.Action
		row := actionRow{ID: a.ID, Contract: a.Contract, Agent: a.Agent, Subject: a.Subject, RequestedAt: a.RequestedAt,
			Claim: a.Claim, Status: commitlayer.VerdictPending}
		if v := it.Verdict; v != nil {
			row.Status, row.Provisional, row.Version = string(v.Status), v.Provisional, v.Version
		}
		out = append(out, row)
	}
	return out
}

type actionsData struct {
	Form      url.Values
	Contracts []string
	Actions   []actionRow
	Next      string // the next page's URL, empty on the last
	First     string // the first page's URL, empty on it
}

// localMinute is what <input type=datetime-local> sends.
var localMinute = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$`)

// listQuery turns the filter form into the list route's parameters: empty
// fields dropped, datetime-local values read as UTC.
func listQuery(form url.Values) url.Values {
	q := url.Values{}
	for _, k := range api.ListParams {
		v := strings.TrimSpace(form.Get(k))
		if v == "" {
			continue
		}
		if (k == "since" || k == "until") && localMinute.MatchString(v) {
			if len(v) == len("2006-01-02T15:04") {
				v += ":00"
			}
			v += "Z"
		}
		q.Set(k, v)
	}
	return q
}

func (c *Console) actions(w http.ResponseWriter, r *http.Request, se *session) {
	ctx, tid := r.Context(), se.tenant.ID
	form := r.URL.Query()
	q := listQuery(form)
	d := actionsData{Form: form}
	if recs, err := c.cfg.Store.ListContracts(ctx, tid); err == nil {
		for _, rec := range recs {
			d.Contracts = append(d.Contracts, rec.ID)
		}
	}
	p := page{Title: "Actions", Nav: "actions", Tenant: se.tenant.Name, CSRF: se.csrf}
	f, err := api.ParseActionFilter(q)
	if err != nil {
		var fe *api.FilterError
		if errors.As(err, &fe) {
			p.Problem, p.Data = "Filter "+fe.Error(), d
			c.render(w, r, http.StatusBadRequest, "actions", p)
			return
		}
		c.fail(w, r, err)
		return
	}
	if f.Limit == 0 {
		f.Limit = api.DefaultListLimit
	}
	pg, err := c.cfg.Store.ListActions(ctx, tid, f)
	if err != nil {
		c.fail(w, r, fmt.Errorf("list actions: %w", err))
		return
	}
	d.Actions = actionRows(pg.Actions)
	if pg.Next != nil {
		nq := listQuery(form)
		nq.Set("cursor", api.EncodeCursor(*pg.Next))
		d.Next = "/console/actions?" + nq.Encode()
	}
	if f.After != nil {
		fq := listQuery(form)
		fq.Del("cursor")
		d.First = "/console/actions?" + fq.Encode()
	}
	p.Data = d
	c.render(w, r, http.StatusOK, "actions", p)
}

// ---- one action ----

type evidence struct {
	Fact  commitlayer.Fact
	Attrs string
}

type findingView struct {
	commitlayer.Finding
	Hint     string
	HintText string
	Evidence []evidence
	Missing  []string // fact ids the store does not have (any more)
}

type stage struct {
	Version     int
	Label       string // provisional, final, reversed, changed
	Status      string
	EvaluatedAt time.Time
	Findings    int
}

type actionData struct {
	Action      commitlayer.ActionRecord
	Params      string
	Verdict     *commitlayer.Verdict
	Findings    []findingView
	Timeline    []stage
	TemporalURL string
	CanRecheck  bool
	Watching    bool
}

func (c *Console) action(w http.ResponseWriter, r *http.Request, se *session) {
	ctx, tid, id := r.Context(), se.tenant.ID, r.PathValue("id")
	p := page{Title: "Action", Nav: "actions", Tenant: se.tenant.Name, CSRF: se.csrf}
	rec, err := c.cfg.Store.GetAction(ctx, tid, id)
	switch {
	case errors.Is(err, commitlayer.ErrNotFound):
		p.Problem = "There is no action by this id."
		c.render(w, r, http.StatusNotFound, "error", p)
		return
	case err != nil:
		c.fail(w, r, fmt.Errorf("get action: %w", err))
		return
	}
	history, err := c.cfg.Store.VerdictHistory(ctx, tid, rec.ID)
	if err != nil {
		c.fail(w, r, fmt.Errorf("verdict history: %w", err))
		return
	}
	d := actionData{Action: rec, Params: compactJSON(rec.Params),
		CanRecheck: c.cfg.Verifier != nil && rec.Verification() != commitlayer.VerificationFailed,
		Watching:   c.now().Before(rec.WatchUntil)}
	if c.cfg.TemporalUI != "" && c.cfg.WorkflowID != nil {
		d.TemporalURL = c.cfg.TemporalUI + "/namespaces/" + url.PathEscape(c.cfg.Namespace) + "/workflows/" +
			url.PathEscape(c.cfg.WorkflowID(tid, rec.ID))
	}
	d.Timeline = timeline(history)
	if len(history) > 0 {
		v := history[len(history)-1]
		d.Verdict = &v
		if d.Findings, err = c.findings(ctx, tid, v.Findings); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	p.Title = "Action " + rec.ID
	switch r.URL.Query().Get("notice") {
	case "rechecked":
		p.Notice = "Re-verified just now."
	case "ended":
		p.Problem = "This verification's watch has ended; its last verdict stands."
	case "unavailable":
		p.Problem = "The verification could not be re-run now; retry later."
	}
	p.Data = d
	c.render(w, r, http.StatusOK, "action", p)
}

// findings attaches each finding's evidence facts.
func (c *Console) findings(ctx context.Context, tid string, fs []commitlayer.Finding) ([]findingView, error) {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.Facts...)
	}
	byID := map[string][]commitlayer.Fact{}
	if len(ids) > 0 {
		cov, err := c.cfg.Store.Sources(ctx, tid)
		if err != nil {
			return nil, fmt.Errorf("sources: %w", err)
		}
		var sources []string
		for _, s := range cov {
			sources = append(sources, s.Source)
		}
		facts, err := c.cfg.Store.FactsByExternalIDs(ctx, tid, sources, ids)
		if err != nil {
			return nil, fmt.Errorf("evidence: %w", err)
		}
		for _, f := range facts {
			byID[f.ExternalID] = append(byID[f.ExternalID], f)
		}
	}
	out := make([]findingView, 0, len(fs))
	for _, f := range fs {
		fv := findingView{Finding: f, Hint: string(f.Hint)}
		if fv.Hint == "" {
			fv.Hint = string(commitlayer.Hint(f.Code))
		}
		fv.HintText = remedyText[commitlayer.Remedy(fv.Hint)]
		for _, id := range f.Facts {
			got := byID[id]
			if len(got) == 0 {
				fv.Missing = append(fv.Missing, id)
			}
			for _, fact := range got {
				fv.Evidence = append(fv.Evidence, evidence{Fact: fact, Attrs: compactJSON(fact.Attrs)})
			}
		}
		out = append(out, fv)
	}
	return out, nil
}

// remedyText says what each remedy asks of the reader.
var remedyText = map[commitlayer.Remedy]string{
	commitlayer.RemedyRetryRead:   "the answer may change on its own: re-verify once the sources report, or after settlement.",
	commitlayer.RemedyHumanReview: "a person should look before anything else happens; nothing automatic is safe.",
	commitlayer.RemedyCompensate:  "an effect happened that must be undone or made good.",
	commitlayer.RemedyNone:        "nothing to do.",
}

// timeline labels each verdict version: provisional while the settlement
// window was open, final for the first one after, reversed for a later
// final one that went from PASS to something else or names a reversal,
// changed for any other later one.
func timeline(history []commitlayer.Verdict) []stage {
	out := make([]stage, 0, len(history))
	var lastFinal *commitlayer.Verdict
	for i := range history {
		v := history[i]
		st := stage{Version: v.Version, Status: string(v.Status), EvaluatedAt: v.EvaluatedAt, Findings: len(v.Findings)}
		switch {
		case v.Provisional:
			st.Label = "provisional"
		case lastFinal == nil:
			st.Label = "final"
		case lastFinal.Status == commitlayer.StatusPass && v.Status != commitlayer.StatusPass || hasCode(v, commitlayer.CodeEffectReversed):
			st.Label = "reversed"
		default:
			st.Label = "changed"
		}
		if !v.Provisional {
			lastFinal = &history[i]
		}
		out = append(out, st)
	}
	return out
}

func hasCode(v commitlayer.Verdict, code commitlayer.Code) bool {
	for _, f := range v.Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

func (c *Console) recheck(w http.ResponseWriter, r *http.Request, se *session) {
	ctx, tid, id := r.Context(), se.tenant.ID, r.PathValue("id")
	rec, err := c.cfg.Store.GetAction(ctx, tid, id)
	switch {
	case errors.Is(err, commitlayer.ErrNotFound):
		c.render(w, r, http.StatusNotFound, "error", page{Title: "Not found", Tenant: se.tenant.Name, CSRF: se.csrf, Problem: "There is no action by this id."})
		return
	case err != nil:
		c.fail(w, r, fmt.Errorf("get action: %w", err))
		return
	}
	notice := "rechecked"
	if c.cfg.Verifier == nil {
		notice = "unavailable"
	} else {
		rctx, cancel := context.WithTimeout(ctx, recheckTimeout)
		_, err := c.cfg.Verifier.Recheck(rctx, tid, rec)
		cancel()
		if err != nil {
			c.log.WarnContext(ctx, "console: recheck", "tenant", tid, "action", rec.ID, "err", err)
			notice = "unavailable"
			if c.now().After(rec.WatchUntil) {
				notice = "ended"
			}
		}
	}
	http.Redirect(w, r, "/console/actions/"+url.PathEscape(rec.ID)+"?notice="+notice, http.StatusSeeOther)
}
