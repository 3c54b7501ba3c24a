package benchapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/sandbox/bench"
	"github.com/commitlayer/commitlayer/sandbox/benchstore"
	"github.com/commitlayer/commitlayer/sandbox/benchstore/benchstoretest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const adminKey = "admin-key-for-tests-0123456789"

// fakeRunner stores a run in the real store, as the runner would.
type fakeRunner struct {
	store *benchstore.Store
	err   error
	reqs  []bench.Request
}

var _ Runner = (*fakeRunner)(nil)

func (f *fakeRunner) Start(ctx context.Context, req bench.Request) (benchstore.Run, error) {
	f.reqs = append(f.reqs, req)
	if f.err != nil {
		return benchstore.Run{}, f.err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return benchstore.Run{}, err
	}
	return f.store.CreateBenchmarkRun(ctx, benchstore.Run{Status: "running", Request: b})
}

// env is the product's API with the benchmark routes mounted, as cmd
// mounts them, on the shared test store.
type env struct {
	t      *testing.T
	store  *benchstore.Store
	runner *fakeRunner
	srv    *api.Server
	logs   *apitest.SyncBuffer
	router routers.Router
	doc    *openapi3.T
}

func newEnv(t *testing.T, opts ...func(*API)) *env {
	t.Helper()
	s := benchstoretest.Store(t)
	e := &env{t: t, store: s, runner: &fakeRunner{store: s}, logs: &apitest.SyncBuffer{}}
	b := &API{Runs: s, Runner: e.runner}
	for _, o := range opts {
		o(b)
	}
	e.srv = api.New(api.Config{
		Store: s, AdminKey: adminKey, Mounts: b.Mounts(), OpenAPIFragments: [][]byte{OpenAPI},
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	e.doc, e.router = servedDoc(t, e.srv)
	return e
}

var htmlOnce sync.Once

// servedDoc loads and validates the served /openapi.json: the API's own
// document with this package's fragment merged in.
func servedDoc(t *testing.T, srv *api.Server) (*openapi3.T, routers.Router) {
	t.Helper()
	htmlOnce.Do(func() { openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder) })
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(rec.Body.Bytes())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(l.Context))
	doc.Servers = nil // match paths on any host
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return doc, router
}

// do sends a request through the API's full handler and checks the answer
// against the served OpenAPI document: the route and status are
// documented, and the body matches the documented schema.
func (e *env) do(r apitest.Request) apitest.Response {
	e.t.Helper()
	hr := r.HTTP(e.t)
	res := apitest.Serve(e.t, e.srv.Handler(), hr)
	route, params, err := e.router.FindRoute(hr)
	require.NoError(e.t, err, "%s %s is not documented", r.Method, r.Path)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: hr, PathParams: params, Route: route},
		Status:                 res.Status,
		Header:                 res.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(res.Body)
	require.NoError(e.t, openapi3filter.ValidateResponse(context.Background(), in),
		"%s %s %d: the answer does not match openapi.json: %s", r.Method, r.Path, res.Status, res.Body)
	return res
}

// tenant creates a tenant through the API's own admin route.
func (e *env) tenant(name string) string {
	e.t.Helper()
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/tenants", Key: adminKey, Body: map[string]string{"name": name}})
	require.Equal(e.t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.JSON(e.t)["api_key"].(string)
}

// failingRuns fails one method with an internal error, to check 500s.
type failingRuns struct {
	Runs
	method string
}

var errBoom = errors.New("connection reset by peer at 10.1.2.3:5432 (secret detail)")

func (f failingRuns) GetBenchmarkRun(ctx context.Context, id string) (benchstore.Run, error) {
	if f.method == "GetBenchmarkRun" {
		return benchstore.Run{}, errBoom
	}
	return f.Runs.GetBenchmarkRun(ctx, id)
}

func (f failingRuns) ListBenchmarkRuns(ctx context.Context) ([]benchstore.Run, error) {
	if f.method == "ListBenchmarkRuns" {
		return nil, errBoom
	}
	return f.Runs.ListBenchmarkRuns(ctx)
}

func (f failingRuns) PurgeBenchmarkTenants(ctx context.Context, runID string) (int, error) {
	if f.method == "PurgeBenchmarkTenants" {
		return 0, errBoom
	}
	return f.Runs.PurgeBenchmarkTenants(ctx, runID)
}
