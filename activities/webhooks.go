package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

// WebhookStore is what deliveries need from the database; *postgres.DB
// has it. A Store without it delivers nothing.
type WebhookStore interface {
	PlanDeliveries(ctx context.Context, tenantID string, d commitlayer.WebhookDelivery) ([]commitlayer.WebhookTarget, error)
	RecordDeliveryAttempt(ctx context.Context, tenantID, webhookID, eventID string, delivered bool, status int, errText string, at time.Time) error
}

// hasWebhooks reports whether the tenant has a webhook; when the store
// cannot say, true (a delivery then finds none and does nothing).
func (a *Activities) hasWebhooks(ctx context.Context, tenantID string) bool {
	hs, ok := a.Store.(interface {
		HasWebhooks(ctx context.Context, tenantID string) (bool, error)
	})
	if !ok {
		return false
	}
	has, err := hs.HasWebhooks(ctx, tenantID)
	if err != nil {
		a.logger(ctx).Warn("has webhooks", "tenant", tenantID, "error", err)
		return true
	}
	return has
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

// webhookTimeout bounds one POST to a receiver: a receiver that hangs is
// a failed attempt, retried with the others.
const webhookTimeout = 10 * time.Second

// WebhookSecretAD binds a sealed webhook secret to its tenant and webhook.
func WebhookSecretAD(tenantID, webhookID string) []byte {
	return []byte("webhook-secret\x00" + tenantID + "\x00" + webhookID)
}

// DeliverWebhooks POSTs a verdict event to every webhook of the tenant
// subscribed to its type that has not had it yet, signed per Standard
// Webhooks with each one's secret (and, during a rotation's overlap, its
// previous secret too). It fails, to be retried with backoff,
// while any of them has not answered 2xx; those that did are not sent it
// again. Addresses follow the connectors' rules (HTTPClient's transport is
// the guard's); redirects are not followed.
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
	body, err := json.Marshal(e)
	if err != nil {
		return DeliverWebhooksResult{}, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	hc := a.webhookClient()
	var res DeliverWebhooksResult
	failed := 0
	for _, t := range targets {
		status, derr := a.deliver(ctx, hc, in.TenantID, e.ID, t, body)
		if derr != nil {
			failed++
			a.logger(ctx).Warn("webhook delivery failed", "tenant", in.TenantID, "webhook", t.WebhookID,
				"event", e.ID, "status", status, "error", netguard.Redact(derr))
		} else {
			res.Delivered++
		}
		if err := ws.RecordDeliveryAttempt(ctx, in.TenantID, t.WebhookID, e.ID, derr == nil, status,
			deliveryError(status, derr), a.now().UTC()); err != nil {
			return res, err
		}
	}
	if failed > 0 {
		return res, fmt.Errorf("event %s: %d of %d webhook deliveries failed; retried", e.ID, failed, len(targets))
	}
	return res, nil
}

// deliver makes one attempt to one webhook, returning the answer's status.
// The message id is the event's: the same on every retry, as the
// specification asks, so receivers de-duplicate by it.
func (a *Activities) deliver(ctx context.Context, hc *http.Client, tenantID, msgID string, t commitlayer.WebhookTarget, body []byte) (int, error) {
	if a.Secrets == nil {
		return 0, fmt.Errorf("webhook %s: %w", t.WebhookID, secrets.ErrNoKey)
	}
	keys := make([]string, 0, 2)
	for _, sealed := range []string{t.Secret, t.Previous} {
		if sealed == "" {
			continue
		}
		secret, err := a.Secrets.Open(sealed, WebhookSecretAD(tenantID, t.WebhookID))
		if err != nil {
			return 0, fmt.Errorf("webhook %s: open secret: %w", t.WebhookID, err)
		}
		keys = append(keys, string(secret))
	}
	ctx, cancel := context.WithTimeout(ctx, webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("webhook %s: %w", t.WebhookID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "CommitLayer-Webhooks/1")
	// The wall clock, whatever clock verdicts use: receivers check it.
	if err := webhook.SetHeaders(req.Header, keys, msgID, time.Now(), body); err != nil {
		return 0, fmt.Errorf("webhook %s: sign: %w", t.WebhookID, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("webhook %s answered %d", t.WebhookID, resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// deliveryError is what a tenant may read about a failed attempt: the
// status, or the class of the transport failure (never its text, which may
// name internal addresses).
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

// webhookClient is HTTPClient's transport (the address rules) with the
// delivery timeout and no redirects: a receiver answers itself.
func (a *Activities) webhookClient() *http.Client {
	var rt http.RoundTripper
	if a.HTTPClient != nil {
		rt = a.HTTPClient.Transport
	}
	return &http.Client{Transport: rt, Timeout: webhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
