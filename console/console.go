// Package console is CommitLayer's web console at /console/, one tenant at
// a time. A tenant logs in with its API key (checked once, never kept: the
// browser holds an opaque session id in an HttpOnly, SameSite=Strict
// cookie). Pages are server-rendered with no script at all (charts are SVG)
// under a strict Content-Security-Policy; forms that change something carry
// a CSRF token bound to the session.
package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// Store is what the console reads; *postgres.DB has all of it.
type Store interface {
	TenantByAPIKey(ctx context.Context, key string) (commitlayer.Tenant, error)
	ListActions(ctx context.Context, tenantID string, f commitlayer.ActionFilter) (commitlayer.ActionPage, error)
	ActionStats(ctx context.Context, tenantID string, q commitlayer.StatsQuery) ([]commitlayer.StatsRow, error)
	GetAction(ctx context.Context, tenantID, actionID string) (commitlayer.ActionRecord, error)
	VerdictHistory(ctx context.Context, tenantID, actionID string) ([]commitlayer.Verdict, error)
	FactsByExternalIDs(ctx context.Context, tenantID string, sources, ids []string) ([]commitlayer.Fact, error)
	Sources(ctx context.Context, tenantID string) ([]commitlayer.SourceCoverage, error)
	ListContracts(ctx context.Context, tenantID string) ([]commitlayer.ContractRecord, error)
	GetContract(ctx context.Context, tenantID, contractID string, version int) (commitlayer.ContractRecord, error)
	ListWebhooks(ctx context.Context, tenantID string) ([]commitlayer.Webhook, error)
	ListDeliveries(ctx context.Context, tenantID, webhookID string, limit int) ([]commitlayer.WebhookDelivery, error)
	// Sessions and login limits are shared by every API process.
	CreateSession(ctx context.Context, tenantID, token string, now, idleUntil, endsAt time.Time, perTenant int) error
	Session(ctx context.Context, token string, now, idleUntil time.Time) (commitlayer.Tenant, error)
	DeleteSession(ctx context.Context, token string) error
	Hit(ctx context.Context, key string, window time.Duration, now time.Time) (int, time.Time, error)
	Unhit(ctx context.Context, key string, until time.Time) error
}

// Rechecker re-runs a verification now (service.Actions has it).
type Rechecker interface {
	Recheck(ctx context.Context, tenantID string, rec commitlayer.ActionRecord) (commitlayer.Verdict, error)
}

// OrphanLister lists a contract's orphan effects (service.Actions has it).
type OrphanLister interface {
	Orphans(ctx context.Context, tenantID, contractID string, since, until time.Time) ([]contracts.Orphan, error)
}

// Defaults of Config's limits (see there).
const (
	DefaultSessionIdle    = 12 * time.Hour
	DefaultSessionMax     = 7 * 24 * time.Hour
	DefaultLoginFailures  = 5
	DefaultTenantLogins   = 30
	DefaultTenantSessions = 500
	recheckTimeout        = 60 * time.Second
	orphanWindow          = 7 * 24 * time.Hour
)

// Config holds the console's dependencies.
type Config struct {
	Store Store
	// Verifier re-runs verifications (the recheck button); nil hides it.
	Verifier Rechecker
	// Orphans lists orphan effects on the overview; nil leaves them out.
	Orphans OrphanLister
	// TemporalUI (http://localhost:8233), Namespace ("default" if empty)
	// and WorkflowID make links to each verification; empty or nil leave
	// them out.
	TemporalUI string
	Namespace  string
	WorkflowID func(tenantID, actionID string) string
	Logger     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SessionIdle ends a session unused this long; SessionMax any session
	// this long after login.
	SessionIdle, SessionMax time.Duration
	// Per minute: wrong keys a client address may send, logins a tenant may
	// make; and live sessions a tenant keeps (past it its own oldest end).
	LoginFailures, TenantLogins, TenantSessions int
}

// Console serves the pages. Build it with New.
type Console struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	pages map[string]*template.Template
	mux   *http.ServeMux
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// Prefix is where the console is mounted.
const Prefix = "/console/"

// New builds the console.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: a store is required")
	}
	c := &Console{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), now: cfg.Now}
	if c.now == nil {
		c.now = time.Now
	}
	c.cfg.Namespace = cmp.Or(cfg.Namespace, "default")
	c.cfg.TemporalUI = strings.TrimRight(c.cfg.TemporalUI, "/")
	c.cfg.SessionIdle = cmp.Or(max(cfg.SessionIdle, 0), DefaultSessionIdle)
	c.cfg.SessionMax = cmp.Or(max(cfg.SessionMax, 0), DefaultSessionMax)
	c.cfg.LoginFailures = cmp.Or(max(cfg.LoginFailures, 0), DefaultLoginFailures)
	c.cfg.TenantLogins = cmp.Or(max(cfg.TenantLogins, 0), DefaultTenantLogins)
	c.cfg.TenantSessions = cmp.Or(max(cfg.TenantSessions, 0), DefaultTenantSessions)
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	assets, err := fs.Sub(assetFiles, "assets")
	if err != nil {
		return nil, fmt.Errorf("console: assets: %w", err)
	}
	m := http.NewServeMux()
	m.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", c.assetServer(assets)))
	m.HandleFunc("GET /console/login", c.serve(c.loginForm))
	m.HandleFunc("POST /console/login", c.serve(c.login))
	m.HandleFunc("POST /console/logout", c.authed(c.logout))
	m.HandleFunc("GET /console/{$}", c.authed(c.overview))
	m.HandleFunc("GET /console/actions", c.authed(c.actions))
	m.HandleFunc("GET /console/actions/{id}", c.authed(c.action))
	m.HandleFunc("POST /console/actions/{id}/recheck", c.authed(c.recheck))
	m.HandleFunc("GET /console/contracts", c.authed(c.contractList))
	m.HandleFunc("GET /console/contracts/{id}", c.authed(c.contract))
	m.HandleFunc("GET /console/webhooks", c.authed(c.webhooks))
	m.HandleFunc("/console/", c.serve(c.notFound))
	c.mux = m
	return c, nil
}

// Handler serves every path under /console/, and /console (a redirect).
func (c *Console) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				c.log.ErrorContext(r.Context(), "console: panic", "panic", fmt.Sprint(v), "path", r.URL.Path, "stack", string(debug.Stack()))
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		if r.URL.Path == "/console" {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		c.mux.ServeHTTP(w, r)
	})
}

// assetServer serves the embedded files, never a directory listing.
func (c *Console) assetServer(assets fs.FS) http.Handler {
	fsrv := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st, err := fs.Stat(assets, strings.TrimPrefix(r.URL.Path, "/")); err != nil || !st.Mode().IsRegular() {
			c.serve(c.notFound)(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}

func (c *Console) parseTemplates() error {
	c.pages = map[string]*template.Template{}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return fmt.Errorf("console: templates: %w", err)
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return nil
}

type page struct {
	Title   string
	Nav     string // the nav entry to mark current
	Tenant  string
	CSRF    string
	Notice  string
	Problem string
	Data    any
}

// render writes a page with status; a template's error is returned before
// anything is written.
func (c *Console) render(w http.ResponseWriter, status int, name string, p page) error {
	t, ok := c.pages[name]
	if !ok {
		return fmt.Errorf("no template %q", name)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
	return nil
}

// serve answers h's error with fail.
func (c *Console) serve(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			c.fail(w, r, err)
		}
	}
}

// fail answers an internal error: a generic page, the detail to the log.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "console: internal error", "err", err, "method", r.Method, "path", r.URL.Path)
	status, msg := http.StatusInternalServerError, "Something went wrong on the server; it has been logged."
	if errors.Is(err, commitlayer.ErrUnavailable) {
		status, msg = http.StatusServiceUnavailable, "The database cannot be reached right now; retry shortly."
		w.Header().Set("Retry-After", "1")
	}
	if c.render(w, status, "error", page{Title: "Error", Problem: msg}) != nil {
		http.Error(w, msg, status)
	}
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) error {
	return c.render(w, http.StatusNotFound, "error", page{Title: "Not found", Problem: "There is no page at this address."})
}

// localPath keeps a ?next= target only when it is a console path once
// cleaned as a browser resolves it: a login cannot send the browser elsewhere.
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || strings.HasPrefix(next, "//") ||
		strings.Contains(next, "\\") || strings.Contains(u.Path, "\\") {
		return Prefix
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if !strings.HasPrefix(clean, Prefix) {
		return Prefix
	}
	return (&url.URL{Path: clean, RawQuery: u.RawQuery}).RequestURI()
}
