// Package sinkstest has in-process fakes of the Braintrust and LangSmith
// REST APIs (httptest servers on loopback) that check the wire shape of
// what they are sent (authentication header, required fields, JSON types),
// keep what arrived, and can be told to fail, stall or recover.
package sinkstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// faults is what a fake does to the next requests.
type faults struct {
	mu       sync.Mutex
	failN    int
	status   int
	body     string
	delay    time.Duration
	requests int
	failAt   map[int]failure
	problems []string
}

type failure struct {
	status int
	body   string
}

// FailNext makes the next n requests answer status with body.
func (f *faults) FailNext(n, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failN, f.status, f.body = n, status, body
}

// FailAt makes the nth request (counting every request the fake has
// received, from 1) answer status with body.
func (f *faults) FailAt(nth, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAt == nil {
		f.failAt = map[int]failure{}
	}
	f.failAt[nth] = failure{status, body}
}

// Stall makes every request wait d before it is answered (0 stops it).
func (f *faults) Stall(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

// Requests counts the requests received.
func (f *faults) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// Problems are the wire-shape violations seen, each answered 400 (or 401
// for a wrong key).
func (f *faults) Problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.problems...)
}

// inject applies the faults to one request; true when it answered.
func (f *faults) inject(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	f.requests++
	delay := f.delay
	fail := f.failN > 0
	status, body := f.status, f.body
	if fail {
		f.failN--
	}
	if at, ok := f.failAt[f.requests]; ok {
		fail, status, body = true, at.status, at.body
	}
	f.mu.Unlock()
	if delay > 0 {
		// Read the body first: only then does the server notice a client
		// that hung up, and cancel the request's context.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return true
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return true
		}
	}
	if fail {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
		return true
	}
	return false
}

// reject records a problem and answers status.
func (f *faults) reject(w http.ResponseWriter, status int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	f.mu.Lock()
	f.problems = append(f.problems, msg)
	f.mu.Unlock()
	http.Error(w, msg, status)
}

// decode reads a JSON object body, checking the content type.
func (f *faults) decode(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		f.reject(w, http.StatusBadRequest, "%s %s: content type %q, want application/json", r.Method, r.URL.Path, ct)
		return nil, false
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.reject(w, http.StatusBadRequest, "%s %s: body is not a JSON object: %v", r.Method, r.URL.Path, err)
		return nil, false
	}
	return body, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// checks collects the problems of one body.
type checks struct {
	where    string
	problems []string
}

func (c *checks) add(format string, args ...any) {
	c.problems = append(c.problems, c.where+": "+fmt.Sprintf(format, args...))
}

func (c *checks) str(m map[string]any, field string, required bool) string {
	v, ok := m[field]
	if !ok || v == nil {
		if required {
			c.add("%s is missing", field)
		}
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		c.add("%s is %T, want a string", field, v)
		return ""
	}
	if required && s == "" {
		c.add("%s is empty", field)
	}
	return s
}

func (c *checks) object(m map[string]any, field string, required bool) map[string]any {
	v, ok := m[field]
	if !ok || v == nil {
		if required {
			c.add("%s is missing", field)
		}
		return nil
	}
	o, isObj := v.(map[string]any)
	if !isObj {
		c.add("%s is %T, want an object", field, v)
	}
	return o
}

func (c *checks) array(m map[string]any, field string, required bool) []any {
	v, ok := m[field]
	if !ok || v == nil {
		if required {
			c.add("%s is missing", field)
		}
		return nil
	}
	a, isArr := v.([]any)
	if !isArr {
		c.add("%s is %T, want an array", field, v)
	}
	return a
}

func (c *checks) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(c.problems, "; "))
}
