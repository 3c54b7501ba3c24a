package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/workflows"
)

// receiver is a webhook endpoint that fails its first attempt (after
// reading it: the event arrived but the answer says otherwise), hangs on
// the second until the sender gives up, then recovers.
type receiver struct {
	mu       sync.Mutex
	attempts int
	got      []delivered
}

type delivered struct {
	header http.Header
	body   []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.attempts++
	n := rc.attempts
	rc.got = append(rc.got, delivered{header: r.Header.Clone(), body: body})
	rc.mu.Unlock()
	switch n {
	case 1:
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
	case 2:
		<-r.Context().Done() // the sender's timeout ends it
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (rc *receiver) deliveries() []delivered {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivered(nil), rc.got...)
}

// TestWebhooksOnDevServer: a verdict webhook's receiver fails, times out
// and recovers; after de-duplication by event id every event of the action
// arrived once, in order, with a valid signature, and GET deliveries shows
// the attempts and the failures. The secret is in no workflow history.
func TestWebhooksOnDevServer(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("COMMITLAYER_SECRETS_KEY", base64.StdEncoding.EncodeToString(key))
	s := newStack(t, Roles{API: true, Worker: true})
	tenantKey := s.tenant()
	rc := &receiver{}
	hook := httptest.NewServer(rc)
	defer hook.Close()

	var created struct {
		ID     string   `json:"id"`
		Secret string   `json:"secret"`
		Events []string `json:"events"`
	}
	s.do(tenantKey, "POST", "/v1/webhooks", map[string]any{"url": hook.URL + "/hooks",
		"events": []string{"verdict.changed", "verdict.final"}}, 201, &created)
	require.True(t, strings.HasPrefix(created.Secret, "whsec_"))
	var list struct {
		Webhooks []map[string]any `json:"webhooks"`
	}
	s.do(tenantKey, "GET", "/v1/webhooks", nil, 200, &list)
	require.Len(t, list.Webhooks, 1)
	require.NotContains(t, list.Webhooks[0], "secret", "the secret is shown once")

	s.do(tenantKey, "POST", "/v1/contracts", payoutContract("payout_hooked", "3s", "5s"), 201, nil)
	now := time.Now().UTC()
	s.do(tenantKey, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("account_opened", "account:acc_h", "acc-h-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("payout_sent", "account:acc_h", "po-h", now.Add(time.Second), map[string]any{"payout_id": "po_h", "amount": 300}),
	}}, 200, nil)
	var act struct {
		ID string `json:"id"`
	}
	s.do(tenantKey, "POST", "/v1/actions", map[string]any{
		"contract": "payout_hooked", "agent": "agent-1", "subject": "account:acc_h",
		"params": map[string]any{"amount": 300}, "requested_at": now.Format(time.RFC3339Nano),
		"claim": map[string]string{"status": "success"},
	}, 202, &act)

	// The verification completes only once its events are delivered.
	wfID := workflows.VerifyWorkflowID(tenantOfKey(s, tenantKey), act.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.VerifyActionResult
	require.NoError(t, s.m.Temporal.GetWorkflow(ctx, wfID, "").Get(ctx, &res))
	require.False(t, res.Verdict.Provisional)

	// Every attempt is signed; de-duplicated by id, the events are the
	// action's verdict versions in order.
	got := rc.deliveries()
	require.GreaterOrEqual(t, len(got), 5, "2 failed attempts and at least 3 events")
	seen := map[string]bool{}
	var events []webhook.Event
	for _, d := range got {
		e, err := webhook.Verify(created.Secret, d.header, d.body, webhook.DefaultTolerance)
		require.NoError(t, err, "signature of %s", d.body)
		_, err = webhook.Verify("whsec_d3Jvbmc=", d.header, d.body, webhook.DefaultTolerance)
		require.ErrorIs(t, err, webhook.ErrMismatch)
		require.Equal(t, e.ID, d.header.Get(webhook.HeaderID), "webhook-id is the event's id")
		var shape map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(d.body, &shape))
		require.ElementsMatch(t, []string{"id", "type", "timestamp", "data", "action_id", "sequence", "verdict"}, slices.Collect(maps.Keys(shape)),
			"the body the specification recommends, and the fields earlier deliveries carried at the top level")
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		events = append(events, e)
	}
	require.Len(t, seen, len(got)-2, "the failed and the timed-out attempt came again, nothing else")
	var kinds []string
	for i, e := range events {
		require.Equal(t, act.ID, e.ActionID)
		require.Equal(t, e.Sequence, e.Verdict.Version)
		if i > 0 {
			require.GreaterOrEqual(t, e.Sequence, events[i-1].Sequence, "in order")
		}
		kinds = append(kinds, e.Type)
	}
	require.Equal(t, "verdict.changed", kinds[0])
	require.True(t, events[0].Verdict.Provisional)
	finals := 0
	for _, e := range events {
		if e.Type == webhook.EventVerdictFinal {
			finals++
			require.False(t, e.Verdict.Provisional)
		}
	}
	require.Equal(t, 1, finals)
	last := events[len(events)-1]
	require.Equal(t, res.Verdict.Version, last.Sequence)

	// GET deliveries: every event delivered; the first took three attempts,
	// and its last failure is recorded.
	var dl struct {
		Deliveries []struct {
			EventID    string `json:"event_id"`
			Status     string `json:"status"`
			Attempts   int    `json:"attempts"`
			LastStatus *int   `json:"last_status"`
			LastError  string `json:"last_error"`
			Sequence   int    `json:"sequence"`
		} `json:"deliveries"`
	}
	s.do(tenantKey, "GET", "/v1/webhooks/"+created.ID+"/deliveries", nil, 200, &dl)
	require.Len(t, dl.Deliveries, len(events))
	attempts := 0
	for _, d := range dl.Deliveries {
		require.Equal(t, commitlayer.DeliveryDelivered, d.Status)
		require.True(t, seen[d.EventID])
		attempts += d.Attempts
		if d.EventID == events[0].ID {
			require.Equal(t, 3, d.Attempts)
		}
	}
	require.Equal(t, len(got), attempts)

	// The secret is in no history: not the verification's.
	it := s.m.Temporal.GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		raw, err := protojson.Marshal(e)
		require.NoError(t, err)
		require.NotContains(t, string(raw), created.Secret)
		require.NotContains(t, string(raw), base64.StdEncoding.EncodeToString([]byte(created.Secret)))
	}
	if *recordHistories {
		recordHistory(t, s, wfID, "workflows", "verify_webhooks.json")
	}

	s.do(tenantKey, "DELETE", "/v1/webhooks/"+created.ID, nil, 204, nil)
	s.do(tenantKey, "GET", "/v1/webhooks/"+created.ID+"/deliveries", nil, 404, nil)
}

// TestWebhookRetryAfterOnDevServer: a receiver that answers 429 with
// Retry-After: 4 gets its next attempt no sooner than 4 s later (the
// retry policy alone would retry after 1 s): the activity's
// NextRetryDelay, honoured by the server. A 410 from another webhook of
// the tenant disables that one and does not hold the event.
func TestWebhookRetryAfterOnDevServer(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("COMMITLAYER_SECRETS_KEY", base64.StdEncoding.EncodeToString(key))
	s := newStack(t, Roles{API: true, Worker: true})
	tenantKey := s.tenant()

	var mu sync.Mutex
	var at []time.Time
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "4")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer limited.Close()
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusGone)
	}))
	defer gone.Close()

	var created, goneHook struct {
		ID string `json:"id"`
	}
	s.do(tenantKey, "POST", "/v1/webhooks", map[string]any{"url": limited.URL, "events": []string{"verdict.changed"}}, 201, &created)
	s.do(tenantKey, "POST", "/v1/webhooks", map[string]any{"url": gone.URL, "events": []string{"verdict.changed"}}, 201, &goneHook)
	s.do(tenantKey, "POST", "/v1/contracts", payoutContract("payout_limited", "1s", "1s"), 201, nil)
	now := time.Now().UTC()
	s.do(tenantKey, "POST", "/v1/facts", map[string]any{"facts": []any{
		fact("account_opened", "account:acc_l", "acc-l-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		fact("payout_sent", "account:acc_l", "po-l", now.Add(-time.Second), map[string]any{"payout_id": "po_l", "amount": 300}),
	}}, 200, nil)
	var act struct {
		ID string `json:"id"`
	}
	s.do(tenantKey, "POST", "/v1/actions", map[string]any{
		"contract": "payout_limited", "agent": "agent-1", "subject": "account:acc_l",
		"params": map[string]any{"amount": 300}, "requested_at": now.Format(time.RFC3339Nano),
		"claim": map[string]string{"status": "success"},
	}, 202, &act)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wfID := workflows.VerifyWorkflowID(tenantOfKey(s, tenantKey), act.ID)
	require.NoError(t, s.m.Temporal.GetWorkflow(ctx, wfID, "").Get(ctx, nil))

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(at), 2)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 3900*time.Millisecond, "the second attempt waited for Retry-After")

	var list struct {
		Webhooks []struct {
			ID             string `json:"id"`
			Enabled        bool   `json:"enabled"`
			DisabledReason string `json:"disabled_reason"`
		} `json:"webhooks"`
	}
	s.do(tenantKey, "GET", "/v1/webhooks", nil, 200, &list)
	for _, w := range list.Webhooks {
		if w.ID == goneHook.ID {
			require.False(t, w.Enabled)
			require.Equal(t, "http 410", w.DisabledReason)
		} else {
			require.True(t, w.Enabled)
		}
	}
}
