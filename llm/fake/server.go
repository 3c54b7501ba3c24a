package fake

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer/llm"
)

// Fault is a failure the server answers one request with instead of
// asking the policy.
type Fault struct {
	// Status is the HTTP status to answer (429, 500, 503, 529 …), in the
	// provider's error format. 0 with Malformed.
	Status int
	// RetryAfter is sent with a 429 (Retry-After, or Gemini's RetryInfo).
	RetryAfter time.Duration
	// Malformed answers 200 with model output that cannot be used: a tool
	// call whose arguments are not a JSON object (Anthropic, OpenAI) or the
	// MALFORMED_FUNCTION_CALL finish reason (Gemini).
	Malformed bool
}

// Request is what the server saw of one request.
type Request struct {
	Path   string
	Status int
	// Turn is the request decoded (empty when it was refused before).
	Turn Turn
}

// Server is one fake provider: an httptest server speaking the provider's
// wire format. Build the adapter for it with llm.New(s.Config()).
type Server struct {
	provider string
	key      string
	model    string
	policy   Policy
	srv      *httptest.Server

	noIDs bool

	mu       sync.Mutex
	faults   []Fault
	requests []Request
	next     int
}

// Option configures a Server; the fields an option sets win over those of
// the options before it.
type Option struct {
	// Key is the API key the server accepts (default "fake-key-<provider>").
	Key string
	// Model is the model the server answers as (default "fake-<provider>").
	Model string
	// NoCallIDs makes the Gemini fake give function calls no id, as some
	// Gemini models do; function responses are then matched by name.
	NoCallIDs bool
}

// Start starts a fake server for provider (llm.Anthropic, llm.OpenAI or
// llm.Google) answering with policy. Close it when done.
func Start(provider string, policy Policy, opts ...Option) (*Server, error) {
	s := &Server{provider: provider, key: "fake-key-" + provider, model: "fake-" + provider, policy: policy}
	for _, o := range opts {
		s.key, s.model = cmp.Or(o.Key, s.key), cmp.Or(o.Model, s.model)
		s.noIDs = s.noIDs || o.NoCallIDs
	}
	if policy == nil {
		return nil, fmt.Errorf("start fake %s: no policy", provider)
	}
	var h http.HandlerFunc
	switch provider {
	case llm.Anthropic:
		h = s.anthropic
	case llm.OpenAI:
		h = s.openai
	case llm.Google:
		h = s.google
	default:
		return nil, fmt.Errorf("start fake: unknown provider %q", provider)
	}
	s.srv = httptest.NewServer(h)
	return s, nil
}

// New starts a fake server for provider and builds the adapter that talks
// to it: what a run with --provider fake needs, one per adapter.
func New(provider string, policy Policy, opts ...Option) (*Server, llm.Provider, error) {
	s, err := Start(provider, policy, opts...)
	if err != nil {
		return nil, nil, err
	}
	p, err := llm.New(s.Config())
	if err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("fake %s: %w", provider, err)
	}
	return s, p, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Provider is the provider the server fakes.
func (s *Server) Provider() string { return s.provider }

// Key is the API key the server accepts.
func (s *Server) Key() string { return s.key }

// BaseURL is the base URL to give the adapter.
func (s *Server) BaseURL() string {
	if s.provider == llm.OpenAI {
		return s.srv.URL + "/v1/"
	}
	return s.srv.URL + "/"
}

// Config is the adapter configuration for this server.
func (s *Server) Config() llm.Config {
	return llm.Config{Provider: s.provider, Model: s.model, APIKey: s.key, BaseURL: s.BaseURL()}
}

// Inject queues faults: the next requests get them, one each, in order.
func (s *Server) Inject(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, faults...)
}

// Requests returns what the server has seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// fault takes the next queued fault.
func (s *Server) fault() (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return Fault{}, false
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	return f, true
}

// id returns the next sequence number for response and call ids.
func (s *Server) id() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return s.next
}

func (s *Server) record(r *http.Request, status int, t Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Status: status, Turn: t})
}

// maxBody bounds a request body.
const maxBody = 8 << 20

// readJSON checks the method and content type and reads the body.
func readJSON(r *http.Request) ([]byte, string) {
	if r.Method != http.MethodPost {
		return nil, "method " + r.Method + " not allowed"
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" && ct != "application/json; charset=utf-8" {
		return nil, fmt.Sprintf("content-type %q, want application/json", ct)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, "read body: " + err.Error()
	}
	if !json.Valid(b) {
		return nil, "body is not JSON"
	}
	return b, ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// tokens estimates a token count from a length in bytes (about four bytes a
// token), at least 1.
func tokens(n int) int64 { return int64(max((n+3)/4, 1)) }

// retryAfterHeader sets Retry-After in whole seconds (at least 1).
func retryAfterHeader(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(int((d+time.Second-1)/time.Second), 1)))
	}
}

// mask shows a key the way OpenAI's error message does: a few characters
// at each end.
func mask(key string) string {
	if len(key) <= 8 {
		return "****"
	}
	return key[:3] + "****" + key[len(key)-4:]
}

// linkResults fills each tool result's Name from the call it answers.
func linkResults(msgs []llm.Message) {
	names := map[string]string{}
	for i := range msgs {
		for _, c := range msgs[i].ToolCalls {
			names[c.ID] = c.Name
		}
		for j := range msgs[i].ToolResults {
			if r := &msgs[i].ToolResults[j]; r.Name == "" {
				r.Name = names[r.CallID]
			}
		}
	}
}
