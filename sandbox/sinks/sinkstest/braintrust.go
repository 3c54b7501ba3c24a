package sinkstest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
)

// Braintrust is a fake Braintrust API: projects, experiments and their
// events, keyed by the one API key it accepts.
type Braintrust struct {
	faults
	*httptest.Server
	key string

	mu          sync.Mutex
	projects    map[string]string // name → id
	experiments map[string]*BraintrustExperiment
	seq         int
}

// BraintrustExperiment is an experiment the fake holds.
type BraintrustExperiment struct {
	ID, ProjectID, Name string
	Metadata            map[string]any
	// Events by id, the last insert of an id winning (as Braintrust
	// replaces a row by id).
	Events map[string]map[string]any
}

// NewBraintrust starts a fake accepting key; Close it when done.
func NewBraintrust(key string) *Braintrust {
	f := &Braintrust{key: key, projects: map[string]string{}, experiments: map[string]*BraintrustExperiment{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/project", f.listProjects)
	mux.HandleFunc("POST /v1/project", f.createProject)
	mux.HandleFunc("POST /v1/experiment", f.createExperiment)
	mux.HandleFunc("POST /v1/experiment/{id}/insert", f.insert)
	f.Server = httptest.NewServer(f.auth(mux))
	return f
}

func (f *Braintrust) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.inject(w, r) {
			return
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+f.key {
			f.reject(w, http.StatusUnauthorized, "%s %s: Authorization is not Bearer and the key", r.Method, r.URL.Path)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (f *Braintrust) nextID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s-%04d", prefix, f.seq)
}

func (f *Braintrust) listProjects(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("project_name")
	f.mu.Lock()
	defer f.mu.Unlock()
	objects := []map[string]any{}
	for n, id := range f.projects {
		if name == "" || n == name {
			objects = append(objects, map[string]any{"id": id, "org_id": "org-1", "name": n})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"objects": objects})
}

func (f *Braintrust) createProject(w http.ResponseWriter, r *http.Request) {
	body, ok := f.decode(w, r)
	if !ok {
		return
	}
	c := checks{where: "POST /v1/project"}
	name := c.str(body, "name", true)
	if err := c.err(); err != nil {
		f.reject(w, http.StatusBadRequest, "%v", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.projects[name]
	if !ok {
		id = f.nextID("proj")
		f.projects[name] = id
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "org_id": "org-1", "name": name})
}

func (f *Braintrust) createExperiment(w http.ResponseWriter, r *http.Request) {
	body, ok := f.decode(w, r)
	if !ok {
		return
	}
	c := checks{where: "POST /v1/experiment"}
	projectID := c.str(body, "project_id", true)
	name := c.str(body, "name", false)
	c.str(body, "description", false)
	meta := c.object(body, "metadata", false)
	f.mu.Lock()
	defer f.mu.Unlock()
	known := false
	for _, id := range f.projects {
		known = known || id == projectID
	}
	if projectID != "" && !known {
		c.add("project_id %q is no project", projectID)
	}
	if err := c.err(); err != nil {
		f.reject(w, http.StatusBadRequest, "%v", err)
		return
	}
	for _, e := range f.experiments {
		if e.ProjectID == projectID && e.Name == name && name != "" {
			writeJSON(w, http.StatusOK, map[string]any{"id": e.ID, "project_id": projectID, "name": name, "public": false})
			return
		}
	}
	e := &BraintrustExperiment{ID: f.nextID("exp"), ProjectID: projectID, Name: name, Metadata: meta,
		Events: map[string]map[string]any{}}
	if e.Name == "" {
		e.Name = e.ID
	}
	f.experiments[e.ID] = e
	writeJSON(w, http.StatusOK, map[string]any{"id": e.ID, "project_id": projectID, "name": e.Name, "public": false})
}

func (f *Braintrust) insert(w http.ResponseWriter, r *http.Request) {
	body, ok := f.decode(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	c := checks{where: "POST /v1/experiment/{id}/insert"}
	events := c.array(body, "events", true)
	for i, raw := range events {
		ev, isObj := raw.(map[string]any)
		ec := checks{where: fmt.Sprintf("%s: events[%d]", c.where, i)}
		if !isObj {
			ec.add("is %T, want an object", raw)
			c.problems = append(c.problems, ec.problems...)
			continue
		}
		ec.str(ev, "id", true)
		for _, field := range []string{"input", "expected", "output"} {
			if _, ok := ev[field]; !ok {
				ec.add("%s is missing", field)
			}
		}
		scores := ec.object(ev, "scores", true)
		for k, v := range scores {
			n, isNum := v.(float64)
			if !isNum || n < 0 || n > 1 {
				ec.add("scores.%s is %v, want a number in [0,1]", k, v)
			}
		}
		ec.object(ev, "metadata", true)
		if m := ec.object(ev, "metrics", false); m != nil {
			for k, v := range m {
				if _, isNum := v.(float64); !isNum {
					ec.add("metrics.%s is %T, want a number", k, v)
				}
			}
		}
		c.problems = append(c.problems, ec.problems...)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, known := f.experiments[id]
	if !known {
		c.add("experiment %q does not exist", id)
	}
	if err := c.err(); err != nil {
		f.reject(w, http.StatusBadRequest, "%v", err)
		return
	}
	rowIDs := []string{}
	for _, raw := range events {
		ev := raw.(map[string]any)
		e.Events[ev["id"].(string)] = ev
		rowIDs = append(rowIDs, ev["id"].(string))
	}
	writeJSON(w, http.StatusOK, map[string]any{"row_ids": rowIDs})
}

// Experiments returns copies of the experiments held.
func (f *Braintrust) Experiments() []BraintrustExperiment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []BraintrustExperiment
	for _, e := range f.experiments {
		cp := *e
		cp.Events = map[string]map[string]any{}
		for k, v := range e.Events {
			cp.Events[k] = v
		}
		out = append(out, cp)
	}
	return out
}
