package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/stretchr/testify/require"
)

// OpenAPI conformance of answers, checked with kin-openapi.

var (
	specOnce sync.Once
	spec     *openapi3.T
	specErr  error
)

// openAPISpec loads openapi.json once and validates it as an OpenAPI
// document (every $ref resolves, schemas are well formed).
func openAPISpec(t testing.TB) *openapi3.T {
	t.Helper()
	specOnce.Do(func() {
		// The report route answers HTML: checked as text (its type and
		// status), like /metrics' text/plain.
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		l := openapi3.NewLoader()
		spec, specErr = l.LoadFromData(OpenAPI)
		if specErr == nil {
			specErr = spec.Validate(l.Context)
		}
	})
	require.NoError(t, specErr, "openapi.json")
	return spec
}

// checkAgainstDoc validates one answer to r, taken by the route pattern
// (as the server's mux names it), against openapi.json: the route is
// documented, the status is listed for it, and the body has the documented
// content type and matches the documented schema. Requests no route took
// (pattern "/") are not in the document; their answer must match the error
// schema every error uses.
func checkAgainstDoc(t testing.TB, r *http.Request, pattern string, res apitest.Response) {
	t.Helper()
	checkAgainstSpec(t, openAPISpec(t), r, pattern, res)
}

// loadSpec loads and validates a served document (the API's own with
// mounts' fragments merged in).
func loadSpec(t testing.TB, data []byte) *openapi3.T {
	t.Helper()
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(data)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(l.Context), "the served openapi.json")
	return doc
}

// checkAgainstSpec is checkAgainstDoc against doc.
func checkAgainstSpec(t testing.TB, doc *openapi3.T, r *http.Request, pattern string, res apitest.Response) {
	t.Helper()
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		require.Contains(t, res.Header.Get("Content-Type"), "application/json", "%s %s: %s", r.Method, r.URL, res.Body)
		var v any
		require.NoError(t, json.Unmarshal(res.Body, &v), "%s %s: body is not JSON: %s", r.Method, r.URL, res.Body)
		require.NoError(t, doc.Components.Schemas["Error"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()),
			"%s %s %d: body does not match the Error schema: %s", r.Method, r.URL, res.Status, res.Body)
		return
	}
	item := doc.Paths.Value(path)
	require.NotNil(t, item, "%s is not in openapi.json", pattern)
	op := item.GetOperation(method)
	require.NotNil(t, op, "%s is not in openapi.json", pattern)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: r,
			Route:   &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op},
		},
		Status:  res.Status,
		Header:  res.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(res.Body)
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), in),
		"%s %d: the answer does not match openapi.json: %s", pattern, res.Status, res.Body)
}

// TestCheckAgainstDocRejects shows the check fails on answers the document
// does not allow.
func TestCheckAgainstDocRejects(t *testing.T) {
	r, err := http.NewRequest(http.MethodGet, "/healthz", nil)
	require.NoError(t, err)
	jsonHeader := http.Header{"Content-Type": []string{"application/json"}}
	for _, tc := range []struct {
		name    string
		pattern string
		res     apitest.Response
	}{
		{"undocumented status", "GET /healthz", apitest.Response{Status: http.StatusTeapot, Header: jsonHeader, Body: []byte(`{"status":"ok"}`)}},
		{"wrong content type", "GET /healthz", apitest.Response{Status: http.StatusOK, Header: http.Header{"Content-Type": []string{"text/plain"}}, Body: []byte(`ok`)}},
		{"body off schema", "GET /healthz", apitest.Response{Status: http.StatusOK, Header: jsonHeader, Body: []byte(`{"status":7}`)}},
		{"undocumented route", "GET /v1/nowhere", apitest.Response{Status: http.StatusOK, Header: jsonHeader, Body: []byte(`{}`)}},
		{"unmatched answer not an error", "/", apitest.Response{Status: http.StatusNotFound, Header: jsonHeader, Body: []byte(`{"message":"no"}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &failT{TB: t}
			func() {
				defer func() { _ = recover() }()
				checkAgainstDoc(ft, r, tc.pattern, tc.res)
			}()
			require.True(t, ft.failed, "the check accepted %s", tc.name)
		})
	}
}

// failT records a failure instead of failing the test; FailNow stops the
// check by panicking, which the caller recovers.
type failT struct {
	testing.TB
	failed bool
}

func (f *failT) Errorf(string, ...any) { f.failed = true }
func (f *failT) FailNow()              { f.failed = true; panic(f) }
func (f *failT) Helper()               {}
