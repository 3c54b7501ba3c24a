package sinkstest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"time"

	"github.com/google/uuid"
)

// LangSmith is a fake LangSmith API: sessions (projects, experiments),
// runs ingested in batches and feedback.
type LangSmith struct {
	faults
	*httptest.Server
	key string

	mu       sync.Mutex
	tenant   string
	sessions map[string]*LangSmithSession // by id
	runs     map[string]map[string]any
	feedback map[string]map[string]any
}

// LangSmithSession is a session (a tracer project) the fake holds.
type LangSmithSession struct {
	ID, Name string
	Extra    map[string]any
}

// NewLangSmith starts a fake accepting key; Close it when done.
func NewLangSmith(key string) *LangSmith {
	f := &LangSmith{key: key, sessions: map[string]*LangSmithSession{}, runs: map[string]map[string]any{},
		feedback: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sessions", f.createSession)
	mux.HandleFunc("POST /api/v1/runs/batch", f.batch)
	mux.HandleFunc("POST /api/v1/feedback", f.createFeedback)
	f.Server = httptest.NewServer(f.auth(mux))
	return f
}

func (f *LangSmith) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.inject(w, r) {
			return
		}
		if got := r.Header.Get("X-Api-Key"); got != f.key {
			f.reject(w, http.StatusUnauthorized, "%s %s: x-api-key is not the key", r.Method, r.URL.Path)
			return
		}
		f.mu.Lock()
		tenant := f.tenant
		f.mu.Unlock()
		if got := r.Header.Get("X-Tenant-Id"); tenant != "" && got != tenant {
			f.reject(w, http.StatusForbidden, "%s %s: x-tenant-id is %q, want %q", r.Method, r.URL.Path, got, tenant)
			return
		}
		if r.Header.Get("Authorization") != "" {
			f.reject(w, http.StatusBadRequest, "%s %s: an Authorization header was sent too", r.Method, r.URL.Path)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequireWorkspace makes the fake refuse requests whose x-tenant-id is not
// id (as LangSmith does for a key linked to several workspaces).
func (f *LangSmith) RequireWorkspace(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tenant = id
}

func (f *LangSmith) createSession(w http.ResponseWriter, r *http.Request) {
	body, ok := f.decode(w, r)
	if !ok {
		return
	}
	c := checks{where: "POST /api/v1/sessions"}
	name := c.str(body, "name", true)
	if st := c.str(body, "start_time", false); st != "" {
		if _, err := time.Parse(time.RFC3339Nano, st); err != nil {
			c.add("start_time %q is not a date-time", st)
		}
	}
	extra := c.object(body, "extra", false)
	if err := c.err(); err != nil {
		f.reject(w, http.StatusBadRequest, "%v", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if s.Name == name {
			if r.URL.Query().Get("upsert") != "true" {
				f.reject(w, http.StatusConflict, "POST /api/v1/sessions: session %q exists", name)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id": s.ID, "name": s.Name, "tenant_id": "tenant-1"})
			return
		}
	}
	s := &LangSmithSession{ID: uuid.NewString(), Name: name, Extra: extra}
	f.sessions[s.ID] = s
	writeJSON(w, http.StatusOK, map[string]any{"id": s.ID, "name": s.Name, "tenant_id": "tenant-1"})
}

var dotted = regexp.MustCompile(`^\d{8}T\d{12}Z([0-9a-f-]{36})$`)

var runTypes = map[string]bool{"tool": true, "chain": true, "llm": true, "retriever": true, "embedding": true,
	"prompt": true, "parser": true}

func (f *LangSmith) batch(w http.ResponseWriter, r *http.Request) {
	body, ok := f.decode(w, r)
	if !ok {
		return
	}
	c := checks{where: "POST /api/v1/runs/batch"}
	post := c.array(body, "post", false)
	patch := c.array(body, "patch", false)
	if len(post)+len(patch) == 0 {
		c.add("neither post nor patch has a run")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var runs []map[string]any
	for i, raw := range append(append([]any{}, post...), patch...) {
		run, isObj := raw.(map[string]any)
		rc := checks{where: fmt.Sprintf("%s: run %d", c.where, i)}
		if !isObj {
			rc.add("is %T, want an object", raw)
			c.problems = append(c.problems, rc.problems...)
			continue
		}
		id := rc.str(run, "id", true)
		if _, err := uuid.Parse(id); id != "" && err != nil {
			rc.add("id %q is not a UUID", id)
		}
		if i < len(post) {
			trace := rc.str(run, "trace_id", true)
			if m := dotted.FindStringSubmatch(rc.str(run, "dotted_order", true)); m == nil || m[1] != id {
				rc.add("dotted_order is not <time>Z<id>")
			}
			if trace != id && run["parent_run_id"] == nil {
				rc.add("a root run's trace_id is not its id")
			}
			rc.str(run, "name", true)
			if rt := rc.str(run, "run_type", true); rt != "" && !runTypes[rt] {
				rc.add("run_type %q is not a run type", rt)
			}
			for _, field := range []string{"start_time", "end_time"} {
				if s := rc.str(run, field, field == "start_time"); s != "" {
					if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
						rc.add("%s %q is not a date-time", field, s)
					}
				}
			}
			rc.object(run, "inputs", true)
			rc.object(run, "outputs", false)
			rc.object(run, "extra", false)
			rc.array(run, "tags", false)
			sid := rc.str(run, "session_id", false)
			if sid == "" && rc.str(run, "session_name", false) == "" {
				rc.add("neither session_id nor session_name")
			}
			if _, known := f.sessions[sid]; sid != "" && !known {
				rc.add("session_id %q is no session", sid)
			}
		} else if _, known := f.runs[id]; !known {
			rc.add("patch of run %q, which was never posted", id)
		}
		c.problems = append(c.problems, rc.problems...)
		runs = append(runs, run)
	}
	if err := c.err(); err != nil {
		f.reject(w, http.StatusBadRequest, "%v", err)
		return
	}
	for i, run := range runs {
		id := run["id"].(string)
		if i < len(post) {
			f.runs[id] = run
			continue
		}
		for k, v := range run {
			f.runs[id][k] = v
		}
	}
	writeJSON(w, http.StatusAccepted, map[string]any{})
}

func (f *LangSmith) createFeedback(w http.ResponseWriter, r *http.Request) {
	body, ok := f.decode(w, r)
	if !ok {
		return
	}
	c := checks{where: "POST /api/v1/feedback"}
	c.str(body, "key", true)
	id := c.str(body, "id", false)
	runID := c.str(body, "run_id", true)
	sid := c.str(body, "session_id", true)
	if v, ok := body["score"]; ok && v != nil {
		if _, isNum := v.(float64); !isNum {
			c.add("score is %T, want a number", v)
		}
	}
	c.str(body, "comment", false)
	c.object(body, "correction", false)
	c.object(body, "feedback_source", false)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, known := f.runs[runID]; runID != "" && !known {
		c.add("run_id %q is no run", runID)
	}
	if _, known := f.sessions[sid]; sid != "" && !known {
		c.add("session_id %q is no session", sid)
	}
	if err := c.err(); err != nil {
		f.reject(w, http.StatusBadRequest, "%v", err)
		return
	}
	if id == "" {
		id = uuid.NewString()
	}
	f.feedback[id] = body
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "key": body["key"], "run_id": runID})
}

// Sessions returns copies of the sessions held.
func (f *LangSmith) Sessions() []LangSmithSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []LangSmithSession
	for _, s := range f.sessions {
		out = append(out, *s)
	}
	return out
}

// Runs returns the runs held, by id.
func (f *LangSmith) Runs() map[string]map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]map[string]any{}
	for k, v := range f.runs {
		out[k] = v
	}
	return out
}

// Feedback returns the feedback held, by id.
func (f *LangSmith) Feedback() map[string]map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]map[string]any{}
	for k, v := range f.feedback {
		out[k] = v
	}
	return out
}
