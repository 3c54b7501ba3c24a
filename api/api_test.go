package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/internal/teststore"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/service"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const adminKey = "admin-key-for-tests-0123456789"

// payoutContract is a small action contract: one effect, one forbid, a
// policy rule, on account subjects.
const payoutContract = `id: send_payout
kind: action
subject: account
settlement: 10m
watch: 1h
sources: [ledger]
policy:
  - id: positive_amount
    rule: params.amount > 0
effects:
  - id: payout
    source: ledger
    type: payout_sent
    count: 1
    expect: effect.amount == params.amount
forbids:
  - id: no_freeze
    source: ledger
    type: account_frozen
`

// anyContract declares no subject type.
const anyContract = `id: note_anything
kind: action
settlement: 1m
watch: 1m
sources: [tickets]
effects:
  - id: note
    source: tickets
    type: note_added
`

// db is the migrated store shared by the package's tests; each test makes
// its own tenants.
func db(t testing.TB) *postgres.DB { return teststore.DB(t) }

// fakeVerifier records what the service asks of Temporal.
type fakeVerifier struct {
	mu          sync.Mutex
	starts      []string // tenant/action
	signals     []string // tenant/action
	startErr    error
	recheckErr  error
	recheckWith commitlayer.Verdict
	rechecks    []string
	// wait, when set, answers Wait; otherwise Wait starts (Start) and
	// answers the store's latest verdict, reached or not.
	wait func(ctx context.Context, tenantID string, a commitlayer.ActionRecord, final bool) (commitlayer.Verdict, bool, error)
}

var _ service.Verifier = (*fakeVerifier)(nil)

func (f *fakeVerifier) Start(_ context.Context, tenantID string, a commitlayer.ActionRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, tenantID+"/"+a.ID)
	return f.startErr
}

func (f *fakeVerifier) Wait(ctx context.Context, tenantID string, a commitlayer.ActionRecord, final bool) (commitlayer.Verdict, bool, error) {
	if f.wait != nil {
		return f.wait(ctx, tenantID, a, final)
	}
	return commitlayer.Verdict{}, false, f.Start(ctx, tenantID, a)
}

func (f *fakeVerifier) Recheck(_ context.Context, tenantID, actionID string) (commitlayer.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rechecks = append(f.rechecks, tenantID+"/"+actionID)
	v := f.recheckWith
	v.ActionID = actionID
	return v, f.recheckErr
}

func (f *fakeVerifier) Signal(_ context.Context, tenantID string, acts []commitlayer.ActionRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range acts {
		f.signals = append(f.signals, tenantID+"/"+a.ID)
	}
	return nil
}

func (f *fakeVerifier) EnsurePoller(context.Context, string) error { return nil }

// answerRechecks sets what Recheck answers; background rechecks may be
// reading it.
func (f *fakeVerifier) answerRechecks(v commitlayer.Verdict) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recheckWith = v
}

func (f *fakeVerifier) recheckCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rechecks)
}

func (f *fakeVerifier) startCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts)
}

// env is one server on the shared store with fakes for Temporal.
type env struct {
	t    *testing.T
	db   *postgres.DB
	ver  *fakeVerifier
	srv  *Server
	reg  *prometheus.Registry
	logs *apitest.SyncBuffer
	now  time.Time
	spec *openapi3.T // the served document, when mounts add to it
}

type envOption func(*Config)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	d := db(t)
	e := &env{
		t: t, db: d, ver: &fakeVerifier{},
		reg: prometheus.NewRegistry(), logs: &apitest.SyncBuffer{},
		now: time.Now().UTC().Truncate(time.Second),
	}
	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	now := func() time.Time { return e.now }
	cfg := Config{
		Store: d, AdminKey: adminKey, Logger: logger, Registry: e.reg, Now: now,
		TemporalHealth: func(context.Context) error { return nil },
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Actions == nil {
		cfg.Actions = service.NewActions(cfg.Store, service.NewContracts(cfg.Store, 0), e.ver, now, logger)
	}
	e.srv = New(cfg)
	return e
}

// withVerifier builds the server's service on v (nil: none).
func withVerifier(v service.Verifier) envOption {
	return func(c *Config) {
		c.Actions = service.NewActions(c.Store, service.NewContracts(c.Store, 0), v, c.Now, c.Logger)
	}
}

// do sends a request through the full handler and checks the answer
// against the OpenAPI document: the status is documented for the route,
// and a JSON body matches the documented schema.
func (e *env) do(r apitest.Request) apitest.Response {
	e.t.Helper()
	hr := r.HTTP(e.t)
	_, pattern := e.srv.mux.Handler(hr.Clone(context.Background()))
	res := apitest.Serve(e.t, e.srv.Handler(), hr)
	if bytes.Equal(e.srv.OpenAPI(), OpenAPI) {
		checkAgainstDoc(e.t, hr, pattern, res)
	} else {
		if e.spec == nil {
			e.spec = loadSpec(e.t, e.srv.OpenAPI())
		}
		checkAgainstSpec(e.t, e.spec, hr, pattern, res)
	}
	return res
}

// notices reads the tenant's notices of new facts not delivered yet.
func (e *env) notices(tenantID string) []postgres.Notice {
	e.t.Helper()
	rows, err := e.db.Pool().Query(context.Background(), `SELECT subjects, except_action_id, digest
		FROM fact_notifications WHERE tenant_id = $1 ORDER BY id`, tenantID)
	require.NoError(e.t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (postgres.Notice, error) {
		var n postgres.Notice
		var subs []string
		err := row.Scan(&subs, &n.ExceptActionID, &n.Digest)
		for _, x := range subs {
			n.Subjects = append(n.Subjects, commitlayer.Subject(x))
		}
		return n, err
	})
	require.NoError(e.t, err)
	return out
}

// waitStarted waits until the action's verification is marked started (the
// start's bookkeeping runs after the answer).
func (e *env) waitStarted(tenantID, actionID string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		rec, err := e.db.GetAction(context.Background(), tenantID, actionID)
		return err == nil && !rec.VerificationStartedAt.IsZero()
	}, 30*time.Second, time.Millisecond)
}

// startsReach waits until the fake verifier was asked for n starts (an
// OTLP export's start after its answer).
func (e *env) startsReach(n int) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return len(e.ver.startCalls()) >= n }, 30*time.Second, time.Millisecond)
}

// tenant creates a tenant through the admin API and returns its id and key.
func (e *env) tenant(name string) (string, string) {
	e.t.Helper()
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/admin/tenants", Key: adminKey, Body: map[string]string{"name": name}})
	require.Equal(e.t, http.StatusCreated, res.Status, "%s", res.Body)
	m := res.JSON(e.t)
	return m["id"].(string), m["api_key"].(string)
}

func (e *env) contract(key, src string) {
	e.t.Helper()
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/contracts", Key: key, Body: src, Header: map[string]string{"Content-Type": "application/yaml"}})
	require.Contains(e.t, []int{http.StatusCreated, http.StatusOK}, res.Status, "%s", res.Body)
}

// action posts a payout action and returns its id.
func (e *env) action(key, subject string, extra map[string]string) string {
	e.t.Helper()
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: extra, Body: map[string]any{
		"contract": "send_payout", "agent": "agent-1", "subject": subject,
		"params": map[string]any{"amount": 2500, "currency": "USD"}, "claim": map[string]string{"status": "success"},
	}})
	require.Equal(e.t, http.StatusAccepted, res.Status, "%s", res.Body)
	return res.JSON(e.t)["id"].(string)
}

func fact(i int, subject string) map[string]any {
	return map[string]any{
		"source": "ledger", "type": "payout_sent", "subject": subject,
		"external_id": "ledger-" + strconv.Itoa(i), "occurred_at": "2026-11-29T10:00:00Z",
		"attrs": map[string]any{"amount": 2500, "currency": "USD"},
	}
}

// failingStore fails one method with an internal error, to check 500s.
type failingStore struct {
	Store
	method string
}

var errBoom = errors.New("connection reset by peer at 10.1.2.3:5432 (secret detail)")

func (f failingStore) fail(m string) error {
	if f.method == m {
		return errBoom
	}
	return nil
}

func (f failingStore) ListContracts(ctx context.Context, tenantID string) ([]commitlayer.ContractRecord, error) {
	if err := f.fail("ListContracts"); err != nil {
		return nil, err
	}
	return f.Store.ListContracts(ctx, tenantID)
}

func (f failingStore) GetContract(ctx context.Context, tenantID, id string, version int) (commitlayer.ContractRecord, error) {
	if err := f.fail("GetContract"); err != nil {
		return commitlayer.ContractRecord{}, err
	}
	return f.Store.GetContract(ctx, tenantID, id, version)
}

func (f failingStore) PutContract(ctx context.Context, tenantID, id string, src []byte) (commitlayer.ContractRecord, bool, error) {
	if err := f.fail("PutContract"); err != nil {
		return commitlayer.ContractRecord{}, false, err
	}
	return f.Store.PutContract(ctx, tenantID, id, src)
}

func (f failingStore) InsertFacts(ctx context.Context, tenantID string, facts []commitlayer.Fact) (commitlayer.InsertResult, error) {
	if err := f.fail("InsertFacts"); err != nil {
		return commitlayer.InsertResult{}, err
	}
	return f.Store.InsertFacts(ctx, tenantID, facts)
}

func (f failingStore) FactsOfKinds(ctx context.Context, tenantID string, kinds []commitlayer.FactType, from, to time.Time) ([]commitlayer.Fact, error) {
	if err := f.fail("FactsOfKinds"); err != nil {
		return nil, err
	}
	return f.Store.FactsOfKinds(ctx, tenantID, kinds, from, to)
}

func (f failingStore) CreateAction(ctx context.Context, tenantID string, a commitlayer.Action, s, w time.Time, key string, h []byte) (commitlayer.ActionRecord, bool, error) {
	if err := f.fail("CreateAction"); err != nil {
		return commitlayer.ActionRecord{}, false, err
	}
	return f.Store.CreateAction(ctx, tenantID, a, s, w, key, h)
}

func (f failingStore) GetAction(ctx context.Context, tenantID, id string) (commitlayer.ActionRecord, error) {
	if err := f.fail("GetAction"); err != nil {
		return commitlayer.ActionRecord{}, err
	}
	return f.Store.GetAction(ctx, tenantID, id)
}

func (f failingStore) VerdictHistory(ctx context.Context, tenantID, id string) ([]commitlayer.Verdict, error) {
	if err := f.fail("VerdictHistory"); err != nil {
		return nil, err
	}
	return f.Store.VerdictHistory(ctx, tenantID, id)
}

func (f failingStore) CreateConnector(ctx context.Context, tenantID string, c commitlayer.Connector) (commitlayer.Connector, error) {
	if err := f.fail("CreateConnector"); err != nil {
		return commitlayer.Connector{}, err
	}
	return f.Store.CreateConnector(ctx, tenantID, c)
}

func (f failingStore) ListConnectors(ctx context.Context, tenantID string) ([]commitlayer.Connector, error) {
	if err := f.fail("ListConnectors"); err != nil {
		return nil, err
	}
	return f.Store.ListConnectors(ctx, tenantID)
}

func (f failingStore) Sources(ctx context.Context, tenantID string) ([]commitlayer.SourceCoverage, error) {
	if err := f.fail("Sources"); err != nil {
		return nil, err
	}
	return f.Store.Sources(ctx, tenantID)
}

func (f failingStore) ActionsOfContract(ctx context.Context, tenantID, id string, since time.Time) ([]commitlayer.Action, error) {
	if err := f.fail("ActionsOfContract"); err != nil {
		return nil, err
	}
	return f.Store.ActionsOfContract(ctx, tenantID, id, since)
}

func (f failingStore) CreateTenant(ctx context.Context, name string) (commitlayer.Tenant, string, error) {
	if err := f.fail("CreateTenant"); err != nil {
		return commitlayer.Tenant{}, "", err
	}
	return f.Store.CreateTenant(ctx, name)
}

func (f failingStore) ListTenants(ctx context.Context) ([]commitlayer.Tenant, error) {
	if err := f.fail("ListTenants"); err != nil {
		return nil, err
	}
	return f.Store.ListTenants(ctx)
}

func (f failingStore) TenantByAPIKey(ctx context.Context, key string) (commitlayer.Tenant, error) {
	if err := f.fail("TenantByAPIKey"); err != nil {
		return commitlayer.Tenant{}, err
	}
	return f.Store.TenantByAPIKey(ctx, key)
}

func withStore(s Store) envOption { return func(c *Config) { c.Store = s } }
