package activities_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

// specVerify is a receiver's check written from the Standard Webhooks
// specification alone (standard-webhooks.md, "Signature scheme",
// "Webhook headers", "Verifying signatures"), sharing no code with
// client/webhook: the secret is "whsec_" + base64 of the key; the signed
// content is "{webhook-id}.{webhook-timestamp}.{body}", HMAC-SHA256,
// base64 (standard, padded); webhook-signature is a space-delimited list of
// "version,signature" of which one "v1" must match, compared in constant
// time; webhook-timestamp is integer unix seconds within five minutes.
func specVerify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing headers")
	}
	if strings.Contains(id, ".") {
		return errors.New("webhook-id holds a full stop")
	}
	if !regexp.MustCompile(`^[0-9]+$`).MatchString(ts) {
		return fmt.Errorf("webhook-timestamp %q is not integer seconds", ts)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return err
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp %s away", d)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + string(body)))
	want := []byte(base64.StdEncoding.EncodeToString(m.Sum(nil)))
	for _, s := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(s, ",")
		if ok && version == "v1" && hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// hook is a receiver: it answers with answer (200 when nil) and keeps
// every request.
type hook struct {
	mu     sync.Mutex
	reqs   []received
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.reqs = append(h.reqs, received{header: r.Header.Clone(), body: body, at: time.Now()})
	n, answer := len(h.reqs), h.answer
	h.mu.Unlock()
	if answer != nil {
		answer(n, w, r)
	}
}

func (h *hook) got() []received {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]received(nil), h.reqs...)
}

// hooks is a fixture with a secrets key and helpers to add webhooks.
type hooks struct {
	*fixture
	box *secrets.Box
}

func newHooks(t *testing.T) *hooks {
	fx := newFixture(t)
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	fx.acts.Secrets = box
	return &hooks{fixture: fx, box: box}
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func (h *hooks) seal(t *testing.T, id, secret string) string {
	sealed, err := h.box.Seal([]byte(secret), commitlayer.WebhookSecretAD(h.tenant, id))
	require.NoError(t, err)
	return sealed
}

func (h *hooks) add(t *testing.T, id, url, secret string) {
	_, err := h.db.CreateWebhook(t.Context(), h.tenant, commitlayer.Webhook{ID: id, URL: url,
		Events: webhook.Events, Secret: h.seal(t, id, secret)})
	require.NoError(t, err)
}

func (h *hooks) deliver(evt string) (activities.DeliverWebhooksResult, error) {
	ev := webhook.Event{ID: evt, Type: webhook.EventVerdictChanged, ActionID: "act_spec", Sequence: 1,
		Verdict: commitlayer.Verdict{ActionID: "act_spec", Status: commitlayer.StatusPass, Version: 1, EvaluatedAt: h.now}}
	val, err := h.env.ExecuteActivity(h.acts.DeliverWebhooks, activities.DeliverWebhooksInput{TenantID: h.tenant, Event: ev})
	var res activities.DeliverWebhooksResult
	if err == nil {
		err = val.Get(&res)
	}
	return res, err
}

func (h *hooks) delivery(t *testing.T, webhookID, evt string) commitlayer.WebhookDelivery {
	t.Helper()
	ds, err := h.db.ListDeliveries(t.Context(), h.tenant, webhookID, 100)
	require.NoError(t, err)
	for _, d := range ds {
		if d.EventID == evt {
			return d
		}
	}
	t.Fatalf("no delivery of %s to %s", evt, webhookID)
	return commitlayer.WebhookDelivery{}
}

// Real deliveries over HTTP, checked by the specification's algorithm
// (specVerify), not ours: headers, the same id on a retry, integer seconds,
// the body's shape; then through a rotation: both secrets verify during
// the overlap, only the new one after it, never a stranger's.
func TestWebhookDeliveriesMeetTheSpecification(t *testing.T) {
	h := newHooks(t)
	rc := &hook{answer: func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	oldSecret := newSecret()
	h.add(t, "wh_spec", srv.URL+"/hook", oldSecret)

	_, err := h.deliver("evt_s1")
	require.Error(t, err, "a 500 is a failed attempt")
	res, err := h.deliver("evt_s1")
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)

	got := rc.got()
	require.Len(t, got, 2)
	for _, r := range got {
		require.NoError(t, specVerify(oldSecret, r.header, r.body, time.Now()))
		require.Error(t, specVerify(newSecret(), r.header, r.body, time.Now()), "a stranger's secret")
		require.Equal(t, "evt_s1", r.header.Get("webhook-id"), "the same id on the retry")
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.Regexp(t, `^v1,[A-Za-z0-9+/]{43}=$`, r.header.Get("webhook-signature"), "one v1 signature, standard base64")
		ts, err := strconv.ParseInt(r.header.Get("webhook-timestamp"), 10, 64)
		require.NoError(t, err)
		require.InDelta(t, r.at.Unix(), ts, 2, "the attempt's time, in seconds")

		var body map[string]any
		require.NoError(t, json.Unmarshal(r.body, &body))
		require.Equal(t, "verdict.changed", body["type"])
		at, err := time.Parse(time.RFC3339Nano, body["timestamp"].(string))
		require.NoError(t, err)
		require.True(t, h.now.Equal(at), "when the event occurred: the verdict's evaluation")
		data := body["data"].(map[string]any)
		require.Equal(t, "act_spec", data["action_id"])
		require.Equal(t, "PASS", data["verdict"].(map[string]any)["status"])
	}
	d := h.delivery(t, "wh_spec", "evt_s1")
	require.Equal(t, commitlayer.DeliveryDelivered, d.Status)
	require.Equal(t, 2, d.Attempts)

	// A rotation with an hour's overlap: two signatures, either verifies.
	newer := newSecret()
	now := time.Now()
	_, err = h.db.RotateWebhook(t.Context(), h.tenant, "wh_spec", h.seal(t, "wh_spec", newer), now, now.Add(time.Hour))
	require.NoError(t, err)
	_, err = h.deliver("evt_s2")
	require.NoError(t, err)
	r := rc.got()[2]
	require.Regexp(t, `^v1,\S+ v1,\S+$`, r.header.Get("webhook-signature"))
	require.NoError(t, specVerify(newer, r.header, r.body, time.Now()), "the new secret")
	require.NoError(t, specVerify(oldSecret, r.header, r.body, time.Now()), "the old secret, during the overlap")
	require.Error(t, specVerify(newSecret(), r.header, r.body, time.Now()))
	require.Error(t, specVerify(oldSecret, r.header, r.body, time.Now().Add(6*time.Minute)), "a replay after five minutes")

	// The overlap over (a rotation to the same secret whose overlap ended).
	_, err = h.db.RotateWebhook(t.Context(), h.tenant, "wh_spec", h.seal(t, "wh_spec", newer), now, now.Add(-time.Second))
	require.NoError(t, err)
	_, err = h.deliver("evt_s3")
	require.NoError(t, err)
	r = rc.got()[3]
	require.Regexp(t, `^v1,\S+$`, r.header.Get("webhook-signature"))
	require.NoError(t, specVerify(newer, r.header, r.body, time.Now()))
	require.Error(t, specVerify(oldSecret, r.header, r.body, time.Now()), "the old secret no longer signs")

	require.NotContains(t, h.logs.String(), oldSecret[len("whsec_"):])
	require.NotContains(t, h.logs.String(), newer[len("whsec_"):])
}

// Each answer as the specification says: any 2xx delivers; 3xx, 4xx and
// 5xx fail and are retried; a Retry-After (429, 503) sets the next
// attempt's delay, bounded; 410 Gone disables the webhook and gives up.
// The deliveries log says what happened, with nothing of the receiver's
// own words.
func TestWebhookAnswers(t *testing.T) {
	h := newHooks(t)
	secret := newSecret()
	serve := func(status int, header map[string]string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			for k, v := range header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "secret-internal-detail")
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for i, status := range []int{200, 201, 202, 204, 299} {
		id := fmt.Sprintf("wh_ok%d", i)
		h.add(t, id, serve(status, nil), secret)
	}
	res, err := h.deliver("evt_ok")
	require.NoError(t, err)
	require.Equal(t, 5, res.Delivered, "any 2xx")
	for i := range 5 {
		require.NoError(t, h.db.DeleteWebhook(t.Context(), h.tenant, fmt.Sprintf("wh_ok%d", i)))
	}

	for _, c := range []struct {
		status    int
		header    map[string]string
		lastError string
		delay     time.Duration
	}{
		{status: 500, lastError: "http 500"},
		{status: 404, lastError: "http 404"},
		{status: 301, header: map[string]string{"Location": "https://example.com/"}, lastError: "http 301"},
		{status: 429, lastError: "http 429"},
		{status: 429, header: map[string]string{"Retry-After": "7"}, lastError: "http 429, retry after 7s", delay: 7 * time.Second},
		{status: 503, header: map[string]string{"Retry-After": time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)}, delay: 90 * time.Second},
		{status: 502, header: map[string]string{"Retry-After": "soon"}, lastError: "http 502"},
	} {
		name := fmt.Sprintf("%d %v", c.status, c.header)
		id := fmt.Sprintf("wh_%d", c.status)
		h.add(t, id, serve(c.status, c.header), secret)
		_, err := h.deliver("evt_fail")
		require.Error(t, err, name)
		var ae *temporal.ApplicationError
		require.True(t, errors.As(err, &ae), name)
		require.False(t, ae.NonRetryable(), name)
		if c.delay > 0 {
			require.InDelta(t, c.delay, ae.NextRetryDelay(), float64(2*time.Second), name)
		} else {
			require.Zero(t, ae.NextRetryDelay(), "%s: the policy's backoff", name)
		}
		d := h.delivery(t, id, "evt_fail")
		require.Equal(t, commitlayer.DeliveryFailing, d.Status, name)
		require.Equal(t, c.status, d.LastStatus, name)
		if c.lastError != "" {
			require.Equal(t, c.lastError, d.LastError, name)
		}
		require.NoError(t, h.db.DeleteWebhook(t.Context(), h.tenant, id))
	}

	// A Retry-After past the end of the delivery window (the test
	// environment's is 10 min; a day in production) is asked at most 1 h,
	// which is past it: this attempt was the last, the delivery is given
	// up and says so, and the error is not retried.
	h.add(t, "wh_later", serve(503, map[string]string{"Retry-After": "86400"}), secret)
	_, err = h.deliver("evt_later")
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae))
	require.True(t, ae.NonRetryable(), "no retry fits in the window")
	d := h.delivery(t, "wh_later", "evt_later")
	require.Equal(t, commitlayer.DeliveryFailed, d.Status)
	require.Equal(t, "http 503, retry after 1h0m0s; given up after 10m0s", d.LastError)
	require.NoError(t, h.db.DeleteWebhook(t.Context(), h.tenant, "wh_later"))

	// 410 Gone: that webhook is disabled, the others are not.
	h.add(t, "wh_gone", serve(http.StatusGone, nil), secret)
	h.add(t, "wh_fine", serve(http.StatusNoContent, nil), secret)
	res, err = h.deliver("evt_gone")
	require.NoError(t, err, "a given-up delivery is not retried")
	require.Equal(t, 1, res.Delivered)
	d = h.delivery(t, "wh_gone", "evt_gone")
	require.Equal(t, commitlayer.DeliveryFailed, d.Status)
	require.Equal(t, 410, d.LastStatus)
	require.Equal(t, "http 410; webhook disabled", d.LastError)
	w, err := h.db.GetWebhook(t.Context(), h.tenant, "wh_gone")
	require.NoError(t, err)
	require.False(t, w.DisabledAt.IsZero())
	require.Equal(t, "http 410", w.DisabledReason)
	res, err = h.deliver("evt_after")
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered, "only the enabled webhook")
	ds, err := h.db.ListDeliveries(t.Context(), h.tenant, "wh_gone", 10)
	require.NoError(t, err)
	require.Len(t, ds, 1, "nothing planned for a disabled webhook")

	require.NotContains(t, h.logs.String(), "secret-internal-detail")
	require.NotContains(t, h.logs.String(), secret[len("whsec_"):])
}

// Hostile receivers: one that never answers is cut off by the timeout,
// one that answers 200 with an endless body is delivered without reading
// it, one that drips its answer is cut off; slow receivers are POSTed to
// side by side, not one after the other.
func TestWebhookHostileReceivers(t *testing.T) {
	h := newHooks(t)
	h.acts.WebhookTimeout = 500 * time.Millisecond
	secret := newSecret()
	done := make(chan struct{}) // every handler returns once the test is over
	defer close(done)

	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(hang.Close)
	h.add(t, "wh_hang", hang.URL, secret)
	start := time.Now()
	_, err := h.deliver("evt_hang")
	require.Error(t, err)
	require.Less(t, time.Since(start), 3*time.Second, "cut off by the timeout")
	require.Equal(t, "timeout", h.delivery(t, "wh_hang", "evt_hang").LastError)
	require.NoError(t, h.db.DeleteWebhook(t.Context(), h.tenant, "wh_hang"))

	var written atomic.Int64
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		for r.Context().Err() == nil && !closed(done) {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(endless.Close)
	h.add(t, "wh_endless", endless.URL, secret)
	start = time.Now()
	res, err := h.deliver("evt_endless")
	require.NoError(t, err, "a 2xx delivers, whatever follows it")
	require.Equal(t, 1, res.Delivered)
	require.Less(t, time.Since(start), 450*time.Millisecond, "the body was not read to its end")
	require.NoError(t, h.db.DeleteWebhook(t.Context(), h.tenant, "wh_endless"))

	drip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		for r.Context().Err() == nil && !closed(done) {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	t.Cleanup(drip.Close)
	h.add(t, "wh_drip", drip.URL, secret)
	start = time.Now()
	_, err = h.deliver("evt_drip")
	require.Error(t, err)
	require.Less(t, time.Since(start), 3*time.Second)
	require.Equal(t, "http 503", h.delivery(t, "wh_drip", "evt_drip").LastError)
	require.NoError(t, h.db.DeleteWebhook(t.Context(), h.tenant, "wh_drip"))

	// Ten receivers taking 300 ms each: side by side, well under 3 s.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(300 * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(slow.Close)
	for i := range 10 {
		h.add(t, fmt.Sprintf("wh_slow%d", i), slow.URL, secret)
	}
	start = time.Now()
	res, err = h.deliver("evt_slow")
	require.NoError(t, err)
	require.Equal(t, 10, res.Delivered)
	require.Less(t, time.Since(start), 2*time.Second)
}

// The address guard holds for webhooks at delivery time: a name that
// resolves to an internal address (DNS rebinding after registration) and
// an internal literal are refused at the dial, never reached; a redirect
// to the metadata endpoint is not followed.
func TestWebhookAddressGuard(t *testing.T) {
	h := newHooks(t)
	secret := newSecret()
	rc := &hook{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	guard := netguard.New(netguard.Options{Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // every name rebinds to the loopback
	}})
	h.acts.HTTPClient = guard.Client()

	h.add(t, "wh_rebind", fmt.Sprintf("http://hooks.example.com:%d/hook", port), secret)
	h.add(t, "wh_literal", srv.URL, secret)
	_, err := h.deliver("evt_guard")
	require.Error(t, err)
	require.Empty(t, rc.got(), "no internal address was reached")
	for _, id := range []string{"wh_rebind", "wh_literal"} {
		d := h.delivery(t, id, "evt_guard")
		require.Equal(t, commitlayer.DeliveryFailing, d.Status, id)
		require.Equal(t, "address not allowed", d.LastError, id)
		require.Zero(t, d.LastStatus, id)
	}
	require.NoError(t, h.db.DeleteWebhook(t.Context(), h.tenant, "wh_rebind"))
	require.NoError(t, h.db.DeleteWebhook(t.Context(), h.tenant, "wh_literal"))

	// The receiver's own address allowed (as a public one would be): its
	// redirect to the metadata endpoint is a failed attempt, not followed.
	allowed := netip.MustParseAddrPort(srv.Listener.Addr().String())
	guard = netguard.New(netguard.Options{Allow: func(ap netip.AddrPort) bool { return ap == allowed }})
	h.acts.HTTPClient = guard.Client()
	rc.answer = func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
	}
	h.add(t, "wh_redirect", srv.URL, secret)
	_, err = h.deliver("evt_redirect")
	require.Error(t, err)
	require.Len(t, rc.got(), 1)
	require.Equal(t, "http 307", h.delivery(t, "wh_redirect", "evt_redirect").LastError)
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
