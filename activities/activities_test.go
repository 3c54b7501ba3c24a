package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/internal/teststore"
	"github.com/commitlayer/commitlayer/postgres"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// feed is an http_events feed whose events the test controls.
type feed struct {
	mu     sync.Mutex
	events []map[string]any
	down   bool
	pulls  int
	// arrived and hold, when set (holdRequests), hold each request.
	arrived chan struct{}
	hold    chan struct{}
}

func (f *feed) add(typ, subject string, at time.Time, attrs map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := len(f.events) + 1
	f.events = append(f.events, map[string]any{"id": "ev-" + strconv.Itoa(seq), "seq": seq, "type": typ,
		"subject": subject, "occurred_at": at.UTC().Format(time.RFC3339Nano), "attrs": attrs})
}

func (f *feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.pulls++
	if f.down {
		f.mu.Unlock()
		http.Error(w, `{"error":{"code":"unavailable","message":"down"}}`, http.StatusServiceUnavailable)
		return
	}
	after, _ := strconv.Atoi(r.URL.Query().Get("after"))
	out := []map[string]any{}
	for _, e := range f.events {
		if e["seq"].(int) > after {
			out = append(out, e)
		}
	}
	more := false
	if limit, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && limit > 0 && len(out) > limit {
		out, more = out[:limit], true
	}
	next := after
	if len(out) > 0 {
		next = out[len(out)-1]["seq"].(int)
	}
	arrived, hold := f.arrived, f.hold
	f.mu.Unlock()
	// The page is what the feed held when the request came; a held
	// request answers it once the test lets it go.
	if arrived != nil {
		arrived <- struct{}{}
	}
	if hold != nil {
		<-hold
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"events": out, "next": next, "more": more})
}

// holdRequests makes every request of the feed report its arrival on the
// returned channel, then wait for a value on release. When the test ends,
// held requests are let go (the server's Close waits for them).
func (f *feed) holdRequests(t *testing.T) (arrived <-chan struct{}, release chan<- struct{}) {
	a, r := make(chan struct{}, 64), make(chan struct{}, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arrived, f.hold = a, r
	t.Cleanup(func() { close(r) })
	return a, r
}

func (f *feed) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pulls
}

const payoutContract = `id: payout
kind: action
subject: account
settlement: 10m
watch: 72h
sources: [ledger]
policy:
  - id: active
    rule: state.ledger.status == 'active'
limits:
  - id: daily
    per: agent
    window: 24h
    effect: payout
    sum: effect.amount
    max: 1000
effects:
  - id: payout
    source: ledger
    type: payout_sent
    count: 1
    expect: effect.amount == params.amount
`

type fixture struct {
	db     *postgres.DB
	tenant string
	feed   *feed
	srv    *httptest.Server
	acts   *activities.Activities
	env    *testsuite.TestActivityEnvironment
	now    time.Time
	logs   *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
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

// notices reads the tenant's notices of new facts not delivered yet: what
// the pulls wrote for the reconcilers to deliver.
func (fx *fixture) notices(t testing.TB) []postgres.Notice {
	t.Helper()
	rows, err := fx.db.Pool().Query(context.Background(), `SELECT subjects, except_action_id, digest
		FROM fact_notifications WHERE tenant_id = $1 ORDER BY id`, fx.tenant)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (postgres.Notice, error) {
		var n postgres.Notice
		var subs []string
		err := row.Scan(&subs, &n.ExceptActionID, &n.Digest)
		for _, x := range subs {
			n.Subjects = append(n.Subjects, commitlayer.Subject(x))
		}
		return n, err
	})
	require.NoError(t, err)
	return out
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	d := teststore.DB(t)
	ctx := context.Background()
	tn, _, err := d.CreateTenant(ctx, t.Name())
	require.NoError(t, err)
	f := &feed{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	_, _, err = d.PutContract(ctx, tn.ID, "payout", []byte(payoutContract))
	require.NoError(t, err)
	_, err = d.CreateConnector(ctx, tn.ID, commitlayer.Connector{Source: "ledger", Kind: "http_events", URL: srv.URL})
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Millisecond)
	logs := &syncBuffer{}
	acts := &activities.Activities{Store: d, Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	return &fixture{db: d, tenant: tn.ID, feed: f, srv: srv, acts: acts, env: env, now: now, logs: logs}
}

func (fx *fixture) action(t testing.TB, agent, subject string, amount int64, at time.Time) string {
	t.Helper()
	a := commitlayer.Action{Contract: "payout", ContractVersion: 1, Agent: agent, Subject: commitlayer.Subject(subject),
		Params: commitlayer.Attrs{"amount": amount}, RequestedAt: at, Claim: commitlayer.Claim{Status: "success"}}
	rec, _, err := fx.db.CreateAction(context.Background(), fx.tenant, a, at.Add(10*time.Minute), at.Add(72*time.Hour), "", []byte(subject+at.String()))
	require.NoError(t, err)
	return rec.ID
}

func (fx *fixture) extract(t *testing.T) activities.ExtractResult {
	t.Helper()
	val, err := fx.env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant})
	require.NoError(t, err)
	var res activities.ExtractResult
	require.NoError(t, val.Get(&res))
	return res
}

func (fx *fixture) evaluate(t testing.TB, id string, in activities.EvaluateInput) activities.EvaluateResult {
	t.Helper()
	in.TenantID, in.ActionID = fx.tenant, id
	val, err := fx.env.ExecuteActivity(fx.acts.Evaluate, in)
	require.NoError(t, err)
	var res activities.EvaluateResult
	require.NoError(t, val.Get(&res))
	return res
}

func TestExtractPullsFromCursorAndNotifies(t *testing.T) {
	fx := newFixture(t)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	res := fx.extract(t)
	require.Equal(t, 1, res.Inserted)
	require.Empty(t, res.Unreachable)
	require.Equal(t, []commitlayer.Subject{"account:acc_1"}, res.Subjects)

	// The cursor moved: a second pull reads only what is new.
	fx.feed.add("payout_sent", "account:acc_1", fx.now, map[string]any{"payout_id": "p1", "amount": 500})
	res = fx.extract(t)
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, 0, res.Duplicates, "the second pull re-read old events")
	conns, err := fx.db.ListConnectors(context.Background(), fx.tenant)
	require.NoError(t, err)
	require.Equal(t, "2", conns[0].Cursor)
	// Each pull that stored facts wrote a notice, with the digest of its
	// facts, for the reconcilers to deliver.
	notices := fx.notices(t)
	require.Len(t, notices, 2)
	require.Equal(t, &contracts.Digest{Kinds: []contracts.KindSince{{FactType: commitlayer.FactType{Source: "ledger", Type: "account_opened"}, Earliest: fx.now.Add(-time.Hour)}}}, notices[0].Digest)
	require.Equal(t, &contracts.Digest{Kinds: []contracts.KindSince{{FactType: commitlayer.FactType{Source: "ledger", Type: "payout_sent"}, Earliest: fx.now}}}, notices[1].Digest)

	// Nothing new: no notice.
	res = fx.extract(t)
	require.Zero(t, res.Inserted)
	require.Len(t, fx.notices(t), 2)
}

// pullRecordingStore counts how a pull is recorded, and runs before
// before it records the empty pulls.
type pullRecordingStore struct {
	activities.Store
	mu          sync.Mutex
	pages       int
	emptyCalls  [][]string
	beforeEmpty func()
}

func (s *pullRecordingStore) RecordPulls(ctx context.Context, tenantID, except string, pages []postgres.PulledPage, at time.Time) (commitlayer.InsertResult, error) {
	s.mu.Lock()
	s.pages += len(pages)
	s.mu.Unlock()
	return s.Store.RecordPulls(ctx, tenantID, except, pages, at)
}

func (s *pullRecordingStore) RecordEmptyPulls(ctx context.Context, tenantID string, ids, cursors []string, at time.Time) ([]string, error) {
	s.mu.Lock()
	s.emptyCalls = append(s.emptyCalls, slices.Clone(ids))
	before := s.beforeEmpty
	s.mu.Unlock()
	if before != nil {
		before()
	}
	return s.Store.RecordEmptyPulls(ctx, tenantID, ids, cursors, at)
}

// TestExtractRecordsEmptyPullsTogether: the connectors that read nothing
// new are recorded in one statement (pull time set, last error cleared,
// cursor kept), not one commit each; a connector pulled again meanwhile
// keeps what that pull recorded.
func TestExtractRecordsEmptyPullsTogether(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	crmFeed := &feed{}
	crmSrv := httptest.NewServer(crmFeed)
	t.Cleanup(crmSrv.Close)
	crm, err := fx.db.CreateConnector(ctx, fx.tenant, commitlayer.Connector{Source: "crm", Kind: "http_events", URL: crmSrv.URL})
	require.NoError(t, err)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	require.Equal(t, 1, fx.extract(t).Inserted)
	fx.feed.down = true
	require.Contains(t, fx.extract(t).Unreachable, "ledger")
	fx.feed.down = false

	store := &pullRecordingStore{Store: fx.db}
	fx.acts.Store = store
	fx.now = fx.now.Add(time.Minute)
	pulledAt := fx.now
	fx.acts.Now = func() time.Time { return pulledAt }
	res := fx.extract(t)
	require.Zero(t, res.Inserted)
	require.Empty(t, res.Unreachable)
	require.Zero(t, store.pages, "an empty pull took a statement of its own")
	require.Len(t, store.emptyCalls, 1)
	require.ElementsMatch(t, []string{crm.ID, mustConnector(t, fx, "ledger").ID}, store.emptyCalls[0])
	for _, c := range []commitlayer.Connector{mustConnector(t, fx, "ledger"), mustConnector(t, fx, "crm")} {
		require.Equal(t, pulledAt, c.LastPullAt, c.Source)
		require.Empty(t, c.LastError, c.Source)
		require.True(t, c.LastErrorAt.IsZero(), c.Source)
	}
	require.Equal(t, "1", mustConnector(t, fx, "ledger").Cursor)

	// Another pull stores crm's first event while this one, which read
	// nothing, records: crm keeps the other pull's cursor and time.
	crmFeed.add("note_added", "account:acc_1", fx.now, map[string]any{"text": "hi"})
	movedAt := pulledAt.Add(time.Second)
	store.beforeEmpty = func() {
		_, err := fx.db.RecordPulls(ctx, fx.tenant, "", []postgres.PulledPage{{ConnectorID: crm.ID, Cursor: "1", Facts: []commitlayer.Fact{{Source: "crm", Type: "note_added",
			Subject: "account:acc_1", ExternalID: "crm-1", OccurredAt: fx.now, Attrs: commitlayer.Attrs{"text": "hi"}}}}}, movedAt)
		require.NoError(t, err)
	}
	crmFeed.mu.Lock()
	saved := crmFeed.events
	crmFeed.events = nil // this pull reads nothing
	crmFeed.mu.Unlock()
	pulledAt = pulledAt.Add(2 * time.Second)
	fx.extract(t)
	crmFeed.mu.Lock()
	crmFeed.events = saved
	crmFeed.mu.Unlock()
	got := mustConnector(t, fx, "crm")
	require.Equal(t, "1", got.Cursor, "a superseded empty pull moved the cursor back")
	require.Equal(t, movedAt, got.LastPullAt)
	require.Equal(t, pulledAt, mustConnector(t, fx, "ledger").LastPullAt)
}

func mustConnector(t *testing.T, fx *fixture, source string) commitlayer.Connector {
	t.Helper()
	conns, err := fx.db.ListConnectors(context.Background(), fx.tenant)
	require.NoError(t, err)
	for _, c := range conns {
		if c.Source == source {
			return c
		}
	}
	t.Fatalf("no %s connector", source)
	return commitlayer.Connector{}
}

func TestExtractReportsUnreachableAndRecordsIt(t *testing.T) {
	fx := newFixture(t)
	fx.feed.down = true
	res := fx.extract(t)
	require.Contains(t, res.Unreachable, "ledger")
	src, err := fx.db.Sources(context.Background(), fx.tenant)
	require.NoError(t, err)
	require.Len(t, src, 1)
	require.NotEmpty(t, src[0].LastError)

	// A closed port is unreachable too.
	fx.srv.Close()
	fx.feed.down = false
	res = fx.extract(t)
	require.Contains(t, res.Unreachable, "ledger")
}

func TestEvaluateStoresVerdictsOnlyWhenTheyChange(t *testing.T) {
	fx := newFixture(t)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_1", fx.now.Add(-time.Minute), map[string]any{"payout_id": "p1", "amount": 500})
	fx.extract(t)
	id := fx.action(t, "agent-1", "account:acc_1", 500, fx.now.Add(-2*time.Minute))

	first := fx.evaluate(t, id, activities.EvaluateInput{Provisional: true})
	require.True(t, first.Changed)
	require.Equal(t, 1, first.Verdict.Version)
	require.True(t, first.Verdict.Provisional)
	require.Equal(t, commitlayer.StatusPass, first.Verdict.Status)
	require.Equal(t, 1, first.Verdict.ContractVersion)

	// A retried activity stores nothing new.
	again := fx.evaluate(t, id, activities.EvaluateInput{Provisional: true})
	require.False(t, again.Changed)
	require.Equal(t, 1, again.Verdict.Version)

	// Unreachable for this pass: the lens is UNKNOWN, a new version.
	unk := fx.evaluate(t, id, activities.EvaluateInput{Unreachable: map[string]string{"ledger": "refused"}})
	require.True(t, unk.Changed)
	require.Equal(t, commitlayer.StatusUnknown, unk.Verdict.Status)
	require.Equal(t, []string{"ledger"}, unk.Verdict.UnavailableSources)
}

func TestEvaluateCountsPriorActionsForLimits(t *testing.T) {
	fx := newFixture(t)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-3*time.Hour), map[string]any{"status": "active"})
	fx.feed.add("account_opened", "account:acc_2", fx.now.Add(-3*time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_2", fx.now.Add(-2*time.Hour), map[string]any{"payout_id": "p1", "amount": 700})
	fx.feed.add("payout_sent", "account:acc_1", fx.now.Add(-time.Minute), map[string]any{"payout_id": "p2", "amount": 500})
	fx.extract(t)
	fx.action(t, "agent-1", "account:acc_2", 700, fx.now.Add(-2*time.Hour-time.Minute))
	id := fx.action(t, "agent-1", "account:acc_1", 500, fx.now.Add(-2*time.Minute))
	res := fx.evaluate(t, id, activities.EvaluateInput{})
	require.Equal(t, commitlayer.StatusFail, res.Verdict.Lenses.Policy)
	require.Equal(t, commitlayer.StatusPass, res.Verdict.Lenses.Outcome)
	require.Equal(t, commitlayer.CodeLimitExceeded, res.Verdict.Findings[0].Code)

	// Another agent's earlier payout does not count.
	other := fx.action(t, "agent-2", "account:acc_1", 500, fx.now.Add(-90*time.Second))
	res = fx.evaluate(t, other, activities.EvaluateInput{})
	require.Equal(t, commitlayer.StatusPass, res.Verdict.Lenses.Policy, "%+v", res.Verdict.Findings)
}

func TestEvaluateBadInputIsNotRetried(t *testing.T) {
	fx := newFixture(t)
	for name, in := range map[string]activities.EvaluateInput{
		"no tenant": {ActionID: "a"},
		"no action": {TenantID: fx.tenant},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fx.env.ExecuteActivity(fx.acts.Evaluate, in)
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			require.True(t, appErr.NonRetryable(), "%v", err)
			require.Equal(t, activities.ErrInvalidInput, appErr.Type())
		})
	}
}

// TestEvaluateActionNotFoundIsRetried: a verification starts only for a
// recorded action, so "not found" means this worker reads another database
// or a lagging replica: retried with backoff (not failed for good), and
// logged as an error. A worker whose database is not the one named in the
// input refuses, retryably, and says so.
func TestEvaluateActionNotFoundIsRetried(t *testing.T) {
	fx := newFixture(t)
	for name, in := range map[string]activities.EvaluateInput{
		"unknown action":   {TenantID: fx.tenant, ActionID: "act_missing"},
		"other tenant":     {TenantID: "t_nobody", ActionID: "act_missing"},
		"another database": {TenantID: fx.tenant, ActionID: "act_missing", StoreID: "not-this-store"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fx.env.ExecuteActivity(fx.acts.Evaluate, in)
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			require.False(t, appErr.NonRetryable(), "%v", err)
		})
	}
	require.Contains(t, fx.logs.String(), "level=ERROR")
	require.Contains(t, fx.logs.String(), "another database than the one the action was recorded in")
}

func TestEndWatchAndOpenVerifications(t *testing.T) {
	fx := newFixture(t)
	id := fx.action(t, "agent-1", "account:acc_1", 1, fx.now)
	val, err := fx.env.ExecuteActivity(fx.acts.OpenVerifications, fx.tenant)
	require.NoError(t, err)
	var n int
	require.NoError(t, val.Get(&n))
	require.Equal(t, 1, n)
	_, err = fx.env.ExecuteActivity(fx.acts.EndWatch, activities.EndWatchInput{TenantID: fx.tenant, ActionID: id})
	require.NoError(t, err)
	val, err = fx.env.ExecuteActivity(fx.acts.OpenVerifications, fx.tenant)
	require.NoError(t, err)
	require.NoError(t, val.Get(&n))
	require.Zero(t, n)
	// Ending an unknown action's watch is not an error (a retried cancel).
	_, err = fx.env.ExecuteActivity(fx.acts.EndWatch, activities.EndWatchInput{TenantID: fx.tenant, ActionID: "act_gone"})
	require.NoError(t, err, fmt.Sprint(err))
}

func TestEvaluateALaterActionEndsTheWindow(t *testing.T) {
	fx := newFixture(t)
	fx.feed.add("account_opened", "account:acc_1", fx.now.Add(-3*time.Hour), map[string]any{"status": "active"})
	fx.feed.add("payout_sent", "account:acc_1", fx.now.Add(-2*time.Hour), map[string]any{"payout_id": "p1", "amount": 100})
	fx.feed.add("payout_sent", "account:acc_1", fx.now.Add(-time.Hour), map[string]any{"payout_id": "p2", "amount": 200})
	fx.extract(t)
	first := fx.action(t, "agent-1", "account:acc_1", 100, fx.now.Add(-2*time.Hour-time.Minute))
	res := fx.evaluate(t, first, activities.EvaluateInput{})
	require.Equal(t, commitlayer.StatusFail, res.Verdict.Status, "without the later action both payouts are this one's")
	require.Equal(t, commitlayer.CodeDuplicateEffect, res.Verdict.Findings[0].Code)

	// The second payout was another action's: the first one stands alone.
	fx.action(t, "agent-1", "account:acc_1", 200, fx.now.Add(-time.Hour-time.Minute))
	res = fx.evaluate(t, first, activities.EvaluateInput{})
	require.Equal(t, commitlayer.StatusPass, res.Verdict.Status, "%+v", res.Verdict.Findings)
}

func TestEvaluateFetchesFactsThroughARelatedRecord(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	_, _, err := fx.db.PutContract(ctx, fx.tenant, "cancel", []byte(`id: cancel
subject: subscription
settlement: 10m
sources: [crm, payments]
effects:
  - id: cancelled
    source: crm
    type: subscription_status_changed
forbids:
  - id: no_refund
    source: payments
    type: refund_created
    through: customer
`))
	require.NoError(t, err)
	at := fx.now.Add(-time.Hour)
	fact := func(src, typ, subject, id string, when time.Time, links ...commitlayer.Subject) commitlayer.Fact {
		return commitlayer.Fact{Source: src, Type: typ, Subject: commitlayer.Subject(subject), ExternalID: id,
			OccurredAt: when, Attrs: commitlayer.Attrs{"status": "x"}, Links: links}
	}
	_, err = fx.db.InsertFacts(ctx, fx.tenant, []commitlayer.Fact{
		fact("crm", "subscription_created", "subscription:sub_1", "s1", at.Add(-time.Hour), "customer:c_1"),
		fact("payments", "charge_captured", "order:o_1", "ch1", at.Add(-time.Hour), "customer:c_1"),
		fact("crm", "subscription_status_changed", "subscription:sub_1", "s2", at.Add(time.Minute)),
		// The agent also refunded the customer's order: two hops away.
		fact("payments", "refund_created", "order:o_1", "re1", at.Add(2*time.Minute)),
	})
	require.NoError(t, err)
	rec, _, err := fx.db.CreateAction(ctx, fx.tenant, commitlayer.Action{Contract: "cancel", ContractVersion: 1, Agent: "a",
		Subject: "subscription:sub_1", RequestedAt: at, Claim: commitlayer.Claim{Status: "success"}},
		at.Add(10*time.Minute), at.Add(10*time.Minute), "", []byte("cancel"))
	require.NoError(t, err)
	res := fx.evaluate(t, rec.ID, activities.EvaluateInput{})
	require.Equal(t, commitlayer.StatusFail, res.Verdict.Lenses.Policy, "%+v", res.Verdict.Findings)
	require.Equal(t, commitlayer.CodeForbiddenEffect, res.Verdict.Findings[0].Code)
	require.Equal(t, []string{"re1"}, res.Verdict.Findings[0].Facts)
}

var _ activities.Store = (*postgres.DB)(nil)
