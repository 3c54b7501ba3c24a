package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/internal/teststore"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/service"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const adminKey = "admin-key-for-client-tests-0123456789"

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
`

// engineVerifier stands in for Temporal: it runs the real Evaluate
// activity on the real store, once provisional at once and once after the
// action's settlement, as VerifyAction would.
type engineVerifier struct {
	db *postgres.DB
	wg sync.WaitGroup
	mu sync.Mutex
	// errs are the evaluation errors, checked at the end of the test.
	errs []error
}

var _ service.Verifier = (*engineVerifier)(nil)

func (v *engineVerifier) Start(_ context.Context, tenantID string, a commitlayer.ActionRecord) error {
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		ctx := context.Background()
		in := activities.EvaluateInput{TenantID: tenantID, ActionID: a.ID}
		first := &activities.Activities{Store: v.db}
		in.Provisional = true
		_, err := first.Evaluate(ctx, in)
		if err == nil {
			time.Sleep(150 * time.Millisecond)
			settled := &activities.Activities{Store: v.db, Now: func() time.Time { return a.SettlesAt.Add(time.Second) }}
			in.Provisional = false
			_, err = settled.Evaluate(ctx, in)
		}
		if err != nil {
			v.mu.Lock()
			v.errs = append(v.errs, err)
			v.mu.Unlock()
		}
	}()
	return nil
}

func (v *engineVerifier) Recheck(ctx context.Context, tenantID, actionID string) (commitlayer.Verdict, error) {
	res, err := (&activities.Activities{Store: v.db}).Evaluate(ctx, activities.EvaluateInput{TenantID: tenantID, ActionID: actionID})
	return res.Verdict, err
}

// Wait starts and answers with the store's latest verdict when it is at
// the stage asked.
func (v *engineVerifier) Wait(ctx context.Context, tenantID string, a commitlayer.ActionRecord, final bool) (commitlayer.Verdict, bool, error) {
	if err := v.Start(ctx, tenantID, a); err != nil {
		return commitlayer.Verdict{}, false, err
	}
	v.wg.Wait()
	got, err := v.db.LatestVerdict(ctx, tenantID, a.ID)
	if err != nil {
		return commitlayer.Verdict{}, false, err
	}
	return got, !final || !got.Provisional, nil
}

func (v *engineVerifier) Signal(context.Context, string, []commitlayer.ActionRecord) error {
	return nil
}
func (v *engineVerifier) EnsurePoller(context.Context, string) error { return nil }

// startServer runs the real API on the real store, in process.
func startServer(t *testing.T) (*httptest.Server, *engineVerifier) {
	t.Helper()
	db := teststore.DB(t)
	ver := &engineVerifier{db: db}
	srv := api.New(api.Config{
		Store: db, Actions: service.NewActions(db, service.NewContracts(db, 0), ver, nil, nil), AdminKey: adminKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry(),
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		ver.wg.Wait()
		require.Empty(t, ver.errs)
	})
	return hs, ver
}

func TestClientAgainstTheAPI(t *testing.T) {
	hs, _ := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin, err := client.New(hs.URL, adminKey)
	require.NoError(t, err)
	require.NoError(t, admin.Health(ctx))

	tenant, err := admin.CreateTenant(ctx, "client-test")
	require.NoError(t, err)
	require.NotEmpty(t, tenant.APIKey)
	tenants, err := admin.ListTenants(ctx)
	require.NoError(t, err)
	require.Contains(t, ids(tenants, func(t client.Tenant) string { return t.ID }), tenant.ID)

	c, err := client.New(hs.URL, tenant.APIKey)
	require.NoError(t, err)

	// A tenant key on an admin route is a typed 403.
	_, err = c.ListTenants(ctx)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.StatusCode)
	require.Equal(t, "forbidden", ae.Code)

	// Contracts: YAML, the same again, then JSON; invalid ones carry details.
	k, created, err := c.PutContract(ctx, []byte(payoutContract))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 1, k.Version)
	_, created, err = c.PutContract(ctx, []byte(payoutContract))
	require.NoError(t, err)
	require.False(t, created)
	jsonContract := `{"id":"note_anything","kind":"action","settlement":"1m","watch":"1m","sources":["tickets"],` +
		`"effects":[{"id":"note","source":"tickets","type":"note_added"}]}`
	k2, created, err := c.PutContract(ctx, []byte(jsonContract))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "note_anything", k2.ID)
	_, _, err = c.PutContract(ctx, []byte("id: broken\nkind: nonsense\n"))
	require.True(t, client.IsCode(err, "invalid_contract"), "%v", err)
	require.ErrorAs(t, err, &ae)
	require.NotEmpty(t, ae.Details)
	list, err := c.ListContracts(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"send_payout", "note_anything"}, ids(list, func(c client.Contract) string { return c.ID }))
	got, err := c.GetContract(ctx, "send_payout", 1)
	require.NoError(t, err)
	require.Equal(t, payoutContract, got.Source)
	_, err = c.GetContract(ctx, "nope", 0)
	require.True(t, client.IsNotFound(err))

	// Facts, idempotent on (source, external id).
	now := time.Now().UTC().Truncate(time.Second)
	facts := []commitlayer.Fact{
		{Source: "ledger", Type: "payout_sent", Subject: "account:a_1", ExternalID: "p1", OccurredAt: now, Attrs: commitlayer.Attrs{"amount": int64(2500)}},
		{Source: "ledger", Type: "payout_sent", Subject: "account:a_9", ExternalID: "p9", OccurredAt: now, Attrs: commitlayer.Attrs{"amount": int64(7)}},
	}
	fr, err := c.PostFacts(ctx, facts)
	require.NoError(t, err)
	require.Equal(t, client.FactsResult{Inserted: 2}, fr)
	fr, err = c.PostFacts(ctx, facts)
	require.NoError(t, err)
	require.Equal(t, client.FactsResult{Duplicates: 2}, fr)

	// Connectors and sources.
	conn, err := c.CreateConnector(ctx, client.ConnectorInput{Source: "tickets", Kind: "http_events", URL: "http://127.0.0.1:1/feed"})
	require.NoError(t, err)
	require.Equal(t, "tickets", conn.Source)
	_, err = c.CreateConnector(ctx, client.ConnectorInput{Source: "tickets", Kind: "http_events", URL: "http://127.0.0.1:1/feed"})
	require.True(t, client.IsCode(err, "conflict"), "%v", err)
	_, err = c.CreateConnector(ctx, client.ConnectorInput{Source: "x", Kind: "carrier_pigeon", URL: "http://127.0.0.1:1/"})
	require.True(t, client.IsCode(err, "unsupported_connector_kind"), "%v", err)
	conns, err := c.ListConnectors(ctx)
	require.NoError(t, err)
	require.Len(t, conns, 1)
	sources, err := c.ListSources(ctx)
	require.NoError(t, err)
	require.Contains(t, ids(sources, func(s client.Source) string { return s.Source }), "ledger")

	// An action, its replay under the same key, and its verdicts.
	act := commitlayer.Action{Contract: "send_payout", Agent: "agent-7", Subject: "account:a_1",
		Params: commitlayer.Attrs{"amount": int64(2500)}, RequestedAt: now.Add(-time.Second), Claim: commitlayer.Claim{Status: "success"}}
	acc, err := c.RecordAction(ctx, act, client.RecordOptions{IdempotencyKey: "step-1"})
	require.NoError(t, err)
	require.False(t, acc.Replayed)
	require.Equal(t, "/v1/actions/"+acc.ID, acc.VerdictURL)
	again, err := c.RecordAction(ctx, act, client.RecordOptions{IdempotencyKey: "step-1"})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, acc.ID, again.ID)
	other := act
	other.Params = commitlayer.Attrs{"amount": int64(1)}
	_, err = c.RecordAction(ctx, other, client.RecordOptions{IdempotencyKey: "step-1"})
	require.True(t, client.IsCode(err, "idempotency_conflict"), "%v", err)
	unknown := act
	unknown.Contract = "no_such_contract"
	_, err = c.RecordAction(ctx, unknown)
	require.True(t, client.IsCode(err, "unknown_contract"), "%v", err)

	prov, err := c.WaitForVerdict(ctx, acc.ID, client.Provisional)
	require.NoError(t, err)
	require.Equal(t, acc.ID, prov.ActionID)
	final, err := c.WaitForVerdict(ctx, acc.ID, client.Final)
	require.NoError(t, err)
	require.False(t, final.Provisional)
	require.Equal(t, commitlayer.StatusPass, final.Status, "%s", final.Summary())
	detail, err := c.GetAction(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, "agent-7", detail.Action.Agent)
	require.NotEmpty(t, detail.History)
	require.Equal(t, final.Version, detail.Verdict.Version)

	re, err := c.Recheck(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, acc.ID, re.ActionID)
	_, err = c.GetAction(ctx, "act_missing")
	require.True(t, client.IsNotFound(err))

	// A payout on an account no action names is an orphan.
	orphans, err := c.ListOrphans(ctx, "send_payout", now.Add(-time.Hour))
	require.NoError(t, err)
	require.Len(t, orphans.Orphans, 1)
	require.Equal(t, "p9", orphans.Orphans[0].Fact.ExternalID)
}

func TestClientFailingVerdict(t *testing.T) {
	hs, _ := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := client.New(hs.URL, adminKey)
	require.NoError(t, err)
	tenant, err := admin.CreateTenant(ctx, "client-fail")
	require.NoError(t, err)
	c, err := client.New(hs.URL, tenant.APIKey)
	require.NoError(t, err)
	_, _, err = c.PutContract(ctx, []byte(payoutContract))
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Second)
	_, err = c.PostFacts(ctx, []commitlayer.Fact{{Source: "ledger", Type: "payout_sent", Subject: "account:a_2",
		ExternalID: "p2", OccurredAt: now, Attrs: commitlayer.Attrs{"amount": int64(99)}}})
	require.NoError(t, err)
	acc, err := c.RecordAction(ctx, commitlayer.Action{Contract: "send_payout", Agent: "a", Subject: "account:a_2",
		Params: commitlayer.Attrs{"amount": int64(2500)}, RequestedAt: now.Add(-time.Second), Claim: commitlayer.Claim{Status: "success"}})
	require.NoError(t, err)
	v, err := c.WaitForVerdict(ctx, acc.ID, client.Final)
	require.NoError(t, err)
	require.Equal(t, commitlayer.StatusFail, v.Status)
	require.True(t, v.ClaimContradicted)
	require.Equal(t, commitlayer.CodeEffectDiffers, v.Findings[0].Code, "%s", v.Summary())

	// Listed with its verdict, counted in the stats.
	list, err := c.ListActions(ctx, client.ActionFilter{Status: "FAIL", Agent: "a", Limit: 10})
	require.NoError(t, err)
	require.Len(t, list.Actions, 1)
	require.Equal(t, acc.ID, list.Actions[0].ID)
	require.Equal(t, "FAIL", list.Actions[0].Status)
	require.Equal(t, commitlayer.StatusFail, list.Actions[0].Verdict.Status)
	require.Empty(t, list.NextCursor)
	list, err = c.ListActions(ctx, client.ActionFilter{Status: "PASS"})
	require.NoError(t, err)
	require.Empty(t, list.Actions)
	_, err = c.ListActions(ctx, client.ActionFilter{Status: "MAYBE"})
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "invalid_request", ae.Code)
	stats, err := c.ActionStats(ctx, client.StatsQuery{Bucket: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, stats.Totals.Fail)
	require.Len(t, stats.Buckets, 1)
	require.Equal(t, "send_payout", stats.Buckets[0].Contract)
}

func ids[T any](list []T, id func(T) string) []string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = id(x)
	}
	return out
}
