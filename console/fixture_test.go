package console_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/console"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/internal/teststore"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/service"
	"github.com/commitlayer/commitlayer/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

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

// The failed action's finding: what the pages must show.
const failMessage = "payout sent 2400 USD, the action asked for 2500 USD"

// fakeVerifier records rechecks (the API's and the console's).
type fakeVerifier struct {
	mu       sync.Mutex
	rechecks []string
}

var _ service.Verifier = (*fakeVerifier)(nil)

func (f *fakeVerifier) Start(context.Context, string, commitlayer.ActionRecord) error { return nil }
func (f *fakeVerifier) Wait(context.Context, string, commitlayer.ActionRecord, bool) (commitlayer.Verdict, bool, error) {
	return commitlayer.Verdict{}, false, nil
}
func (f *fakeVerifier) Signal(context.Context, string, []commitlayer.ActionRecord) error { return nil }
func (f *fakeVerifier) EnsurePoller(context.Context, string) error                       { return nil }
func (f *fakeVerifier) Recheck(_ context.Context, tenantID, actionID string) (commitlayer.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rechecks = append(f.rechecks, tenantID+"/"+actionID)
	return commitlayer.Verdict{ActionID: actionID, Status: commitlayer.StatusFail, Version: 2}, nil
}

func (f *fakeVerifier) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.rechecks...)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fixture is a tenant with a contract, facts, actions (one FAIL with a
// finding and its evidence, PASSes, UNKNOWNs, pending ones, a provisional
// one), a webhook with deliveries and a connector in error; and the API
// with the console mounted as cmd mounts them, on a real HTTP server.
type fixture struct {
	db     *postgres.DB
	tenant commitlayer.Tenant
	key    string
	failID string
	passID string
	// failedStartID is an action whose verification never started.
	failedStartID string
	ver           *fakeVerifier
	logs          *syncBuffer
	srv           *httptest.Server
	console       *console.Console
	now           time.Time
	clock         func() time.Time
	setClock      func(time.Time)

	mu        sync.Mutex
	responses []recorded // every answer the console sent, to look for the key
}

type recorded struct {
	header http.Header
	body   []byte
}

// startRefusal is why the fixture's failed start failed.
const startRefusal = "search attribute CommitLayerAgent value exceeds size limit"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	db := teststore.DB(t)
	tenant, key, err := db.CreateTenant(ctx, "Acme payouts "+fmt.Sprint(time.Now().UnixNano()%100000))
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Second)
	var clockMu sync.Mutex
	cur := now
	fx := &fixture{db: db, tenant: tenant, key: key, ver: &fakeVerifier{}, logs: &syncBuffer{}, now: now}
	fx.clock = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return cur }
	fx.setClock = func(t time.Time) { clockMu.Lock(); defer clockMu.Unlock(); cur = t }

	_, _, err = db.PutContract(ctx, tenant.ID, "send_payout", []byte(payoutContract))
	require.NoError(t, err)
	_, _, err = db.PutContract(ctx, tenant.ID, "send_payout", []byte(strings.Replace(payoutContract, "watch: 1h", "watch: 2h", 1)))
	require.NoError(t, err)
	_, _, err = db.PutContract(ctx, tenant.ID, "refund_customer", []byte(strings.Replace(payoutContract, "id: send_payout", "id: refund_customer", 1)))
	require.NoError(t, err)

	create := func(contract, agent, subject string, at time.Time) string {
		rec, _, err := db.CreateAction(ctx, tenant.ID, commitlayer.Action{Contract: contract, ContractVersion: 2, Agent: agent,
			Subject: commitlayer.Subject(subject), RequestedAt: at, Params: commitlayer.Attrs{"amount": int64(2500), "currency": "USD"},
			Claim: commitlayer.Claim{Status: "success", Message: "paid out"}}, at.Add(10*time.Minute), at.Add(72*time.Hour), "", nil)
		require.NoError(t, err)
		return rec.ID
	}
	record := func(contract, agent, subject string, at time.Time) string {
		id := create(contract, agent, subject, at)
		// Its verification is under way (the fixture stands in for it).
		// Left unstarted, the action would be a pending start that the
		// reconciler of any other test process on the run's shared test
		// database picks up, verifies for real and gives a FAIL of its own:
		// CI once saw 2 and once 6 rows where the FAIL filter leaves 1.
		require.NoError(t, db.VerificationStarted(ctx, tenant.ID, id))
		return id
	}
	verdict := func(id string, st commitlayer.Status, provisional bool, fs ...commitlayer.Finding) {
		outcome := st
		_, _, err := db.AppendVerdict(ctx, tenant.ID, commitlayer.Verdict{ActionID: id, Contract: "send_payout", ContractVersion: 2,
			Status: st, Provisional: provisional, Lenses: commitlayer.Lenses{Outcome: outcome, Policy: commitlayer.StatusPass},
			Findings: fs, EvaluatedAt: now, SettlesAt: now.Add(10 * time.Minute)})
		require.NoError(t, err)
	}
	_, err = db.InsertFacts(ctx, tenant.ID, []commitlayer.Fact{{Source: "ledger", Type: "payout_sent", Subject: "account:acc_7",
		ExternalID: "ledger-po-7", OccurredAt: now.Add(-2 * time.Hour), Attrs: commitlayer.Attrs{"amount": int64(2400), "currency": "USD"}}})
	require.NoError(t, err)

	// A day of activity for the chart.
	agents := []string{"payout-bot", "ops-assistant"}
	for i := range 24 {
		at := now.Add(-time.Duration(i)*time.Hour - 5*time.Minute)
		for j := 0; j < 1+i%3; j++ {
			contract := "send_payout"
			if j == 2 {
				contract = "refund_customer"
			}
			id := record(contract, agents[(i+j)%2], fmt.Sprintf("account:acc_h%d_%d", i, j), at.Add(-time.Duration(j)*time.Minute))
			switch (i + j) % 7 {
			case 0:
				verdict(id, commitlayer.StatusUnknown, false, commitlayer.Finding{Code: commitlayer.CodeSourceUnavailable, Check: "payout",
					Lens: commitlayer.LensOutcome, Message: "source ledger could not be read"})
			case 3:
				// pending: no verdict
			default:
				verdict(id, commitlayer.StatusPass, false)
			}
		}
	}
	fx.passID = record("send_payout", "payout-bot", "account:acc_1", now.Add(-90*time.Minute))
	verdict(fx.passID, commitlayer.StatusPass, true)
	verdict(fx.passID, commitlayer.StatusPass, false)
	fx.failID = record("send_payout", "payout-bot", "account:acc_7", now.Add(-2*time.Hour))
	verdict(fx.failID, commitlayer.StatusPass, true)
	verdict(fx.failID, commitlayer.StatusPass, false)
	verdict(fx.failID, commitlayer.StatusFail, false, commitlayer.Finding{Code: commitlayer.CodeEffectDiffers, Check: "payout",
		Lens: commitlayer.LensOutcome, Message: failMessage, Facts: []string{"ledger-po-7"}})
	open := record("send_payout", "ops-assistant", "account:acc_9", now.Add(-3*time.Minute))
	verdict(open, commitlayer.StatusPass, true)
	// An action whose start Temporal refused for good (verify marks it).
	fx.failedStartID = create("send_payout", "ops-assistant", "account:acc_11", now.Add(-4*time.Minute))
	_, err = db.StartFailed(ctx, tenant.ID, fx.failedStartID, startRefusal)
	require.NoError(t, err)

	// A webhook with deliveries, a connector in error.
	_, err = db.CreateWebhook(ctx, tenant.ID, commitlayer.Webhook{ID: "wh_console", URL: "https://hooks.example.com/commitlayer",
		Events: webhook.Events, Secret: "sealed-not-shown"})
	require.NoError(t, err)
	_, err = db.RotateWebhook(ctx, tenant.ID, "wh_console", "sealed-new-not-shown", now.Add(-time.Hour), now.Add(23*time.Hour))
	require.NoError(t, err)
	for i, ok := range []bool{true, false} {
		evt := fmt.Sprintf("evt_%d", i)
		_, err := db.PlanDeliveries(ctx, tenant.ID, commitlayer.WebhookDelivery{EventID: evt, EventType: webhook.EventVerdictChanged,
			ActionID: fx.failID, Sequence: i + 1})
		require.NoError(t, err)
		status := 204
		if !ok {
			status = 503
		}
		state := map[bool]string{true: commitlayer.DeliveryDelivered, false: commitlayer.DeliveryFailing}[ok]
		require.NoError(t, db.RecordDeliveryAttempt(ctx, tenant.ID, "wh_console", evt, state, status, map[bool]string{false: "http 503"}[ok], now))
	}
	conn, err := db.CreateConnector(ctx, tenant.ID, commitlayer.Connector{Source: "crm", Kind: "http_events", URL: "https://crm.example.com"})
	require.NoError(t, err)
	require.NoError(t, db.RecordPullError(ctx, tenant.ID, conn.ID, "timeout", now.Add(-time.Minute)))

	logger := slog.New(slog.NewJSONHandler(fx.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	contracts := service.NewContracts(db, 0)
	actions := service.NewActions(db, contracts, fx.ver, nil, logger)
	apiSrv := api.New(api.Config{Store: db, Actions: actions, Logger: logger, Contracts: contracts, AdminKey: "admin-key-0123456789"})
	fx.console, err = console.New(console.Config{Store: db, Verifier: actions, Orphans: actions,
		TemporalUI: "http://temporal-ui.example:8233", Namespace: "default", WorkflowID: workflows.VerifyWorkflowID,
		Logger: logger, Now: fx.clock})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", fx.console.Handler())
	mux.Handle("/console", fx.console.Handler())
	mux.Handle("/", apiSrv.Handler())
	fx.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		if strings.HasPrefix(r.URL.Path, "/console") {
			fx.mu.Lock()
			fx.responses = append(fx.responses, recorded{header: rec.Header().Clone(), body: rec.Body.Bytes()})
			fx.mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(fx.srv.Close)
	return fx
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects (the tests look at them).
func (fx *fixture) browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (fx *fixture) get(t *testing.T, c *http.Client, path string) answer {
	t.Helper()
	res, err := c.Get(fx.srv.URL + path)
	require.NoError(t, err)
	return read(t, res)
}

func (fx *fixture) post(t *testing.T, c *http.Client, path string, form url.Values, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fx.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	require.NoError(t, err)
	return read(t, res)
}

func read(t *testing.T, res *http.Response) answer {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return answer{status: res.StatusCode, header: res.Header, body: string(b)}
}

// login logs c in with the tenant's key.
func (fx *fixture) login(t *testing.T, c *http.Client) {
	t.Helper()
	a := fx.post(t, c, "/console/login", url.Values{"api_key": {fx.key}, "next": {"/console/"}})
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
}

// csrf reads the CSRF token from a page's forms.
func csrf(t *testing.T, body string) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	require.GreaterOrEqual(t, i, 0, "a form with a csrf token")
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

// noKeyAnywhere checks that no answer of the console held the key.
func (fx *fixture) noKeyAnywhere(t *testing.T) {
	t.Helper()
	fx.mu.Lock()
	defer fx.mu.Unlock()
	require.NotEmpty(t, fx.responses)
	for _, r := range fx.responses {
		require.NotContains(t, string(r.body), fx.key, "a console page holds the API key")
		for k, vs := range r.header {
			for _, v := range vs {
				require.NotContains(t, v, fx.key, "header %s holds the API key", k)
			}
		}
	}
	require.NotContains(t, fx.logs.String(), fx.key, "the log holds the API key")
}
