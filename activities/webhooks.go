package activities

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

// WebhookStore is what deliveries need from the database; *postgres.DB
// has it. A Store without it delivers nothing.
type WebhookStore interface {
	PlanDeliveries(ctx context.Context, tenantID string, d commitlayer.WebhookDelivery) ([]commitlayer.WebhookTarget, error)
	RecordDeliveryAttempt(ctx context.Context, tenantID, webhookID, eventID, state string, status int, errText string, at time.Time) error
	DisableWebhook(ctx context.Context, tenantID, id, reason string, at time.Time) error
	GiveUpDeliveries(ctx context.Context, tenantID, eventID, reason string, at time.Time) error
}

// DeliverWebhooksInput is one verdict event of one action.
type DeliverWebhooksInput struct {
	TenantID string
	Event    webhook.Event
}

// DeliverWebhooksResult counts the deliveries made by this attempt.
type DeliverWebhooksResult struct {
	Delivered int
}

// Delivery bounds.
const (
	// defaultWebhookTimeout bounds one POST, dial to answer (the spec says 15
	// to 30 s): a receiver that hangs or drips its answer fails the attempt.
	defaultWebhookTimeout = 15 * time.Second
	// webhookParallel: 20 webhooks each taking the whole timeout fit in the
	// activity's two minutes.
	webhookParallel = 8
	// webhookAnswerRead is how much of an answer is read, to reuse the connection.
	webhookAnswerRead = 4 << 10
	// maxRetryAfter caps the delay a receiver's Retry-After may ask.
	maxRetryAfter = time.Hour
)

// DeliverWebhooks POSTs a verdict event to every enabled subscribed webhook not
// yet delivered, signed per Standard Webhooks (with the previous secret too
// during a rotation's overlap), webhookParallel at once. It fails, to be
// retried, while any has not answered 2xx; a failed receiver's Retry-After
// (the longest, at most maxRetryAfter) replaces the backoff. A 410 Gone
// disables the webhook, as the spec asks, giving up its pending deliveries.
// Addresses follow the connectors' rules; a 3xx is a failed attempt.
func (a *Activities) DeliverWebhooks(ctx context.Context, in DeliverWebhooksInput) (DeliverWebhooksResult, error) {
	ws, ok := a.Store.(WebhookStore)
	if !ok {
		return DeliverWebhooksResult{}, nil
	}
	e := in.Event
	targets, err := ws.PlanDeliveries(ctx, in.TenantID, commitlayer.WebhookDelivery{
		EventID: e.ID, EventType: e.Type, ActionID: e.ActionID, Sequence: e.Sequence,
	})
	if err != nil {
		return DeliverWebhooksResult{}, err
	}
	if len(targets) == 0 {
		return DeliverWebhooksResult{}, nil
	}
	body, err := e.Body()
	if err != nil {
		return DeliverWebhooksResult{}, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	hc := a.webhookClient()
	var (
		mu        sync.Mutex
		res       DeliverWebhooksResult
		failed    int
		nextDelay time.Duration // the longest Retry-After of a failed receiver
		recordErr error
	)
	sem := make(chan struct{}, webhookParallel)
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			at := a.deliver(ctx, hc, in.TenantID, e.ID, t, body)
			state, errText := commitlayer.DeliveryDelivered, ""
			switch {
			case at.gone():
				state, errText = commitlayer.DeliveryFailed, at.describe()+"; webhook disabled"
			case at.err != nil:
				state, errText = commitlayer.DeliveryFailing, at.describe()
				a.logger(ctx).Warn("webhook delivery failed", "tenant", in.TenantID, "webhook", t.WebhookID,
					"event", e.ID, "status", at.status, "error", netguard.Redact(at.err))
			}
			now := a.now().UTC()
			rerr := ws.RecordDeliveryAttempt(ctx, in.TenantID, t.WebhookID, e.ID, state, at.status, errText, now)
			if rerr == nil && at.gone() {
				a.logger(ctx).Warn("webhook disabled: its receiver answered 410 Gone", "tenant", in.TenantID, "webhook", t.WebhookID)
				rerr = ws.DisableWebhook(ctx, in.TenantID, t.WebhookID, fmt.Sprintf("http %d", at.status), now)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case rerr != nil && recordErr == nil:
				recordErr = rerr
			case state == commitlayer.DeliveryDelivered:
				res.Delivered++
			}
			if state == commitlayer.DeliveryFailing {
				failed++
				nextDelay = max(nextDelay, at.retryAfter)
			}
		}()
	}
	wg.Wait()
	if recordErr != nil {
		return res, recordErr
	}
	if failed > 0 && activity.IsActivity(ctx) && lastAttempt(activity.GetInfo(ctx), nextDelay, time.Now()) {
		// No retry would start before the window closes: say so rather than
		// leave them "failing".
		window := activity.GetInfo(ctx).ScheduleToCloseTimeout
		if err := ws.GiveUpDeliveries(ctx, in.TenantID, e.ID, "given up after "+window.String(), a.now().UTC()); err != nil {
			return res, err
		}
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("event %s: %d of %d webhook deliveries failed; given up after %s", e.ID, failed, len(targets), window),
			"WebhookGivenUp", nil)
	}
	if failed > 0 {
		msg := fmt.Sprintf("event %s: %d of %d webhook deliveries failed; retried", e.ID, failed, len(targets))
		if nextDelay > 0 {
			// The receiver's Retry-After replaces the policy's next
			// interval (this once; the backoff goes on after it).
			return res, temporal.NewApplicationErrorWithOptions(msg+" after "+nextDelay.String(), "WebhookRetryAfter",
				temporal.ApplicationErrorOptions{NextRetryDelay: nextDelay})
		}
		return res, errors.New(msg)
	}
	return res, nil
}

// lastAttempt reports whether a failed attempt is the last: the next would
// start at or past the schedule-to-close deadline. False when unknown.
func lastAttempt(info activity.Info, retryAfter time.Duration, now time.Time) bool {
	if info.ScheduleToCloseTimeout <= 0 || info.ScheduledTime.IsZero() {
		return false
	}
	end := info.ScheduledTime.Add(info.ScheduleToCloseTimeout)
	next := retryAfter
	if next <= 0 {
		p := info.RetryPolicy
		if p == nil {
			return false
		}
		if p.MaximumAttempts > 0 && info.Attempt >= p.MaximumAttempts {
			return true
		}
		initial := cmp.Or(p.InitialInterval, time.Second)
		coef := p.BackoffCoefficient
		if coef < 1 {
			coef = 2
		}
		maxInterval := cmp.Or(p.MaximumInterval, 100*initial)
		next = initial
		for i := int32(1); i < info.Attempt && next < maxInterval; i++ {
			next = time.Duration(float64(next) * coef)
		}
		next = min(next, maxInterval)
	}
	return !now.Add(next).Before(end)
}

// attempt is how one POST to one receiver went.
type attempt struct {
	status     int           // the answer's status; 0 when there was none
	err        error         // nil when delivered (2xx)
	retryAfter time.Duration // the answer's Retry-After, bounded; 0 when none
}

// gone: the receiver wants no more deliveries.
func (at attempt) gone() bool { return at.status == http.StatusGone }

// describe is what a tenant may read about a failed attempt: the status and
// Retry-After, or the failure's class (its text may name internal addresses).
func (at attempt) describe() string {
	d := deliveryError(at.status, at.err)
	if at.retryAfter > 0 {
		d += ", retry after " + at.retryAfter.String()
	}
	return d
}

// deliver makes one attempt to one webhook. The message id is the event's, the
// same on every retry, so receivers de-duplicate by it.
func (a *Activities) deliver(ctx context.Context, hc *http.Client, tenantID, msgID string, t commitlayer.WebhookTarget, body []byte) attempt {
	if a.Secrets == nil {
		return attempt{err: fmt.Errorf("webhook %s: %w", t.WebhookID, secrets.ErrNoKey)}
	}
	keys := make([]string, 0, 2)
	for _, sealed := range []string{t.Secret, t.Previous} {
		if sealed == "" {
			continue
		}
		secret, err := a.Secrets.Open(sealed, commitlayer.WebhookSecretAD(tenantID, t.WebhookID))
		if err != nil {
			return attempt{err: fmt.Errorf("webhook %s: open secret: %w", t.WebhookID, err)}
		}
		keys = append(keys, string(secret))
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(a.WebhookTimeout, defaultWebhookTimeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return attempt{err: fmt.Errorf("webhook %s: %w", t.WebhookID, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "CommitLayer-Webhooks/1")
	// The wall clock, whatever clock verdicts use: receivers check it.
	if err := webhook.SetHeaders(req.Header, keys, msgID, time.Now(), body); err != nil {
		return attempt{err: fmt.Errorf("webhook %s: sign: %w", t.WebhookID, err)}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return attempt{err: err}
	}
	defer resp.Body.Close()
	// Read a little so the connection can be reused; a slow answer is cut by the timeout.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookAnswerRead))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return attempt{status: resp.StatusCode}
	}
	at := attempt{status: resp.StatusCode, err: fmt.Errorf("webhook %s answered %d", t.WebhookID, resp.StatusCode)}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		at.retryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return at
}

// retryAfter reads a Retry-After header (seconds or an HTTP date) as a delay,
// at most maxRetryAfter; 0 when absent, unreadable or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs >= int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now).Round(time.Second)
	}
	return min(max(d, 0), maxRetryAfter)
}

// deliveryError is the status, or the class of the transport failure.
func deliveryError(status int, err error) string {
	switch {
	case err == nil:
		return ""
	case status != 0:
		return fmt.Sprintf("http %d", status)
	case errors.Is(err, secrets.ErrNoKey):
		return "no secrets key on the worker"
	case errors.Is(err, secrets.ErrOpen):
		return "secret does not open with the worker's key"
	}
	return netguard.Classify(err)
}

// webhookClient is HTTPClient's transport with the delivery timeout and no redirects.
func (a *Activities) webhookClient() *http.Client {
	var rt http.RoundTripper
	if a.HTTPClient != nil {
		rt = a.HTTPClient.Transport
	}
	return &http.Client{Transport: rt, Timeout: cmp.Or(a.WebhookTimeout, defaultWebhookTimeout),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
