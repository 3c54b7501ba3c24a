package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/contracts"
)

func loginPage(next, problem string) page {
	return page{Title: "Log in", Problem: problem, Data: next}
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) error {
	next := localPath(r.URL.Query().Get("next"))
	if se, err := c.sessionOf(r); err == nil && se != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	return c.render(w, http.StatusOK, "login", loginPage(next, ""))
}

// login checks the key (never logged, echoed or kept) and starts a
// session. Each attempt counts against the client's address before the key
// is checked, so a burst cannot slip past the limit, and is taken back
// when the key is right: only wrong keys use up LoginFailures.
func (c *Console) login(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		return c.render(w, http.StatusBadRequest, "login", loginPage(Prefix, "The form could not be read."))
	}
	next := localPath(r.PostFormValue("next"))
	problem := func(status int, msg string) error {
		return c.render(w, status, "login", loginPage(next, msg))
	}
	tooMany := func(until time.Time, who string) error {
		secs := api.RetryAfter(until.Sub(c.now()))
		w.Header().Set("Retry-After", secs)
		return problem(http.StatusTooManyRequests, fmt.Sprintf("Too many %s; try again in %ss.", who, secs))
	}
	if !sameOrigin(r) {
		return problem(http.StatusForbidden, "This login came from another site.")
	}
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	if key == "" {
		return problem(http.StatusBadRequest, "Enter your tenant's API key.")
	}
	ctx, ip, now := r.Context(), api.ClientAddr(r), c.now()
	addrKey := "login:" + api.LimitAddr(r)
	n, until, err := c.cfg.Store.Hit(ctx, addrKey, time.Minute, now)
	if err != nil {
		return fmt.Errorf("count login: %w", err)
	}
	if n > c.cfg.LoginFailures {
		return tooMany(until, "wrong keys from your address")
	}
	t, err := c.cfg.Store.TenantByAPIKey(ctx, key)
	switch {
	case errors.Is(err, commitlayer.ErrNotFound):
		c.log.InfoContext(ctx, "console: wrong key", "client", ip)
		return problem(http.StatusUnauthorized, "That key is not a tenant's API key.")
	case err != nil:
		return fmt.Errorf("check key: %w", err)
	}
	if err := c.cfg.Store.Unhit(ctx, addrKey, until); err != nil {
		return fmt.Errorf("count login: %w", err)
	}
	if n, until, err := c.cfg.Store.Hit(ctx, "login-tenant:"+t.ID, time.Minute, now); err != nil {
		return fmt.Errorf("count login: %w", err)
	} else if n > c.cfg.TenantLogins {
		return tooMany(until, "logins for this tenant")
	}
	id := token()
	if err := c.cfg.Store.CreateSession(ctx, t.ID, id, now, now.Add(c.cfg.SessionIdle), now.Add(c.cfg.SessionMax), c.cfg.TenantSessions); err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	c.setSessionCookie(w, r, id)
	c.log.InfoContext(ctx, "console: login", "tenant", t.ID, "client", ip)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *session) error {
	if ck, err := r.Cookie(CookieName); err == nil {
		if err := c.cfg.Store.DeleteSession(r.Context(), ck.Value); err != nil {
			return fmt.Errorf("end session: %w", err)
		}
	}
	c.setSessionCookie(w, r, "")
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
	return nil
}

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
	Orphans   []contracts.Orphan
	OrphanErr []string
	Sources   []commitlayer.SourceCoverage
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, se *session) error {
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
		return fmt.Errorf("stats: %w", err)
	}
	// The selectors list every contract and agent of the window.
	all := rows
	if d.Contract != "" || d.Agent != "" {
		if all, err = c.cfg.Store.ActionStats(ctx, tid, commitlayer.StatsQuery{Bucket: win.Bucket, Since: sq.Since, Until: sq.Until}); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
	}
	for _, row := range all {
		d.Contracts, d.Agents = append(d.Contracts, row.Contract), append(d.Agents, row.Agent)
	}
	slices.Sort(d.Contracts)
	slices.Sort(d.Agents)
	d.Contracts, d.Agents = slices.Compact(d.Contracts), slices.Compact(d.Agents)
	d.Chart = buildChart(rows, sq.Since, sq.Until, win.Bucket)
	for _, row := range rows {
		i, found := slices.BinarySearchFunc(d.Groups, row, func(g groupRow, row commitlayer.StatsRow) int {
			return cmp.Or(cmp.Compare(g.Contract, row.Contract), cmp.Compare(g.Agent, row.Agent))
		})
		if !found {
			d.Groups = slices.Insert(d.Groups, i, groupRow{Contract: row.Contract, Agent: row.Agent})
		}
		d.Groups[i].Counts.Add(row.Counts)
		d.Totals.Add(row.Counts)
	}
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
			return fmt.Errorf("list actions: %w", err)
		}
		*l.dst = actionRows(p.Actions)
	}
	if d.Sources, err = c.cfg.Store.Sources(ctx, tid); err != nil {
		return fmt.Errorf("sources: %w", err)
	}
	if c.cfg.Orphans != nil {
		d.Orphans, d.OrphanErr = c.orphans(ctx, tid, now)
	}
	return c.render(w, http.StatusOK, "overview", se.page("Overview", "overview", "", d))
}

// orphans lists every contract's orphans of the last week (at most 20);
// one that cannot be scanned is named and the page still renders.
func (c *Console) orphans(ctx context.Context, tid string, now time.Time) ([]contracts.Orphan, []string) {
	recs, err := c.cfg.Store.ListContracts(ctx, tid)
	if err != nil {
		c.log.WarnContext(ctx, "console: orphans: list contracts", "err", err)
		return nil, []string{"contracts could not be listed"}
	}
	var out []contracts.Orphan
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
		out = append(out, os[:min(len(os), 20-len(out))]...)
	}
	return out, problems
}

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

// listQuery turns the filter form into list parameters, datetime-local
// values read as UTC.
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

func (c *Console) actions(w http.ResponseWriter, r *http.Request, se *session) error {
	ctx, tid := r.Context(), se.tenant.ID
	form := r.URL.Query()
	d := actionsData{Form: form}
	if recs, err := c.cfg.Store.ListContracts(ctx, tid); err == nil {
		for _, rec := range recs {
			d.Contracts = append(d.Contracts, rec.ID)
		}
	}
	p := se.page("Actions", "actions", "", &d)
	f, err := api.ParseActionFilter(listQuery(form))
	var fe *api.FilterError
	if errors.As(err, &fe) {
		p.Problem = "Filter " + fe.Error()
		return c.render(w, http.StatusBadRequest, "actions", p)
	} else if err != nil {
		return err
	}
	if f.Limit == 0 {
		f.Limit = api.DefaultListLimit
	}
	pg, err := c.cfg.Store.ListActions(ctx, tid, f)
	if err != nil {
		return fmt.Errorf("list actions: %w", err)
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
	return c.render(w, http.StatusOK, "actions", p)
}

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

// getAction loads the path's action; !ok when it answered (404, or err).
func (c *Console) getAction(w http.ResponseWriter, r *http.Request, se *session) (commitlayer.ActionRecord, bool, error) {
	rec, err := c.cfg.Store.GetAction(r.Context(), se.tenant.ID, r.PathValue("id"))
	switch {
	case errors.Is(err, commitlayer.ErrNotFound):
		p := se.page("Action", "actions", "There is no action by this id.", nil)
		return rec, false, c.render(w, http.StatusNotFound, "error", p)
	case err != nil:
		return rec, false, fmt.Errorf("get action: %w", err)
	}
	return rec, true, nil
}

func (c *Console) action(w http.ResponseWriter, r *http.Request, se *session) error {
	ctx, tid := r.Context(), se.tenant.ID
	rec, ok, err := c.getAction(w, r, se)
	if !ok {
		return err
	}
	history, err := c.cfg.Store.VerdictHistory(ctx, tid, rec.ID)
	if err != nil {
		return fmt.Errorf("verdict history: %w", err)
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
			return err
		}
	}
	p := se.page("Action "+rec.ID, "actions", "", d)
	switch r.URL.Query().Get("notice") {
	case "rechecked":
		p.Notice = "Re-verified just now."
	case "ended":
		p.Problem = "This verification's watch has ended; its last verdict stands."
	case "unavailable":
		p.Problem = "The verification could not be re-run now; retry later."
	}
	return c.render(w, http.StatusOK, "action", p)
}

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

var remedyText = map[commitlayer.Remedy]string{
	commitlayer.RemedyRetryRead:   "the answer may change on its own: re-verify once the sources report, or after settlement.",
	commitlayer.RemedyHumanReview: "a person should look before anything else happens; nothing automatic is safe.",
	commitlayer.RemedyCompensate:  "an effect happened that must be undone or made good.",
	commitlayer.RemedyNone:        "nothing to do.",
}

// timeline labels each verdict: provisional, final (the first after),
// reversed (a later one off PASS or naming a reversal) or changed.
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
	return slices.ContainsFunc(v.Findings, func(f commitlayer.Finding) bool { return f.Code == code })
}

func (c *Console) recheck(w http.ResponseWriter, r *http.Request, se *session) error {
	ctx, tid := r.Context(), se.tenant.ID
	rec, ok, err := c.getAction(w, r, se)
	if !ok {
		return err
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
	return nil
}
