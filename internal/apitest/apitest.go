// Package apitest holds what the tests of the API and of the routes
// mounted on it (sandbox/benchapi) share: a request sent through a server's
// full handler, the decoded answer with the error shape checked, and a log
// sink safe for concurrent handlers. Each test package keeps its own
// environment (store, fakes) and its own check against the OpenAPI
// document it serves.
package apitest

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Request is a request to send.
type Request struct {
	Method, Path, Key string
	// Body is a string, []byte, or a value to marshal as JSON.
	Body   any
	Header map[string]string
	// RemoteAddr is the client's address; empty sends from a random one,
	// so per-address limits (wrong keys) of one request reach no other.
	RemoteAddr string
}

// HTTP builds the request: the body encoded, the key as a bearer token,
// the headers set.
func (r Request) HTTP(t testing.TB) *http.Request {
	t.Helper()
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		require.NoError(t, err)
		body = bytes.NewReader(buf)
	}
	hr := httptest.NewRequest(r.Method, r.Path, body)
	hr.RemoteAddr = r.RemoteAddr
	if hr.RemoteAddr == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		hr.RemoteAddr = fmt.Sprintf("[2001:db8:%x:%x::1]:1234", b[:2], b[2:]) // a /64 of its own
	}
	if r.Key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.Key)
	}
	for k, v := range r.Header {
		hr.Header.Set(k, v)
	}
	return hr
}

// Response is an answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Serve sends hr through h and returns the answer, which must carry an
// X-Request-Id.
func Serve(t testing.TB, h http.Handler, hr *http.Request) Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, hr)
	res := Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	require.NotEmpty(t, res.Header.Get("X-Request-Id"))
	return res
}

// JSON decodes a JSON object body.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body: %s", r.Body)
	return m
}

// ErrCode returns the error code of an error answer, checking its shape:
// {"error": {"code", "message"}} and nothing else.
func (r Response) ErrCode(t testing.TB) string {
	t.Helper()
	m := r.JSON(t)
	require.Len(t, m, 1, "error body has only \"error\": %s", r.Body)
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "error body: %s", r.Body)
	require.NotEmpty(t, e["message"], "error message: %s", r.Body)
	code, _ := e["code"].(string)
	return code
}

// ErrMessage returns the message of an error answer.
func (r Response) ErrMessage(t testing.TB) string {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

// SyncBuffer is a log sink safe for concurrent handlers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
