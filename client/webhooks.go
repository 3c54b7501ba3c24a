package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// WebhookInput is the body of CreateWebhook.
type WebhookInput struct {
	URL string `json:"url"`
	// Events: webhook.EventVerdictChanged, webhook.EventVerdictFinal.
	Events []string `json:"events"`
}

// Webhook is a verdict webhook.
type Webhook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"created_at"`
	// RotatedAt is the last rotation; the secret it replaced still signs
	// next to the current one until PreviousSecretUntil.
	RotatedAt           *time.Time `json:"rotated_at,omitempty"`
	PreviousSecretUntil *time.Time `json:"previous_secret_until,omitempty"`
	// Enabled is false once the receiver answered 410 Gone: nothing is
	// delivered to it until EnableWebhook.
	Enabled        bool       `json:"enabled"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
}

// WebhookCreated is a webhook with its secret, answered only by
// CreateWebhook and RotateWebhook: keep it, it is not shown again
// (webhook.Verify checks deliveries with it).
type WebhookCreated struct {
	Webhook
	Secret string `json:"secret"`
}

// WebhookRotation is the body of RotateWebhook: how long the old secret
// keeps signing (a Go duration; absent: the server's default).
type WebhookRotation struct {
	Overlap string `json:"overlap,omitempty"`
}

// WebhookList is GET /v1/webhooks; WebhookDeliveryList is a webhook's
// deliveries.
type (
	WebhookList struct {
		Webhooks []Webhook `json:"webhooks"`
	}
	WebhookDeliveryList struct {
		Deliveries []WebhookDelivery `json:"deliveries"`
	}
)

// WebhookDelivery is one event's delivery to a webhook.
type WebhookDelivery struct {
	EventID  string `json:"event_id"`
	Type     string `json:"type"`
	ActionID string `json:"action_id"`
	Sequence int    `json:"sequence"`
	// Status: pending, delivered, failing (retried with backoff for 24 h),
	// failed (given up: the webhook was disabled by a 410 Gone, or 24 h
	// of retries are over).
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	LastStatus *int       `json:"last_status"`
	LastError  string     `json:"last_error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	Delivered  *time.Time `json:"delivered_at"`
}

// CreateWebhook subscribes a URL to verdict events and returns the webhook
// with its secret, shown this once. Retried only when the server surely
// did not act (a retry could create a second webhook).
func (c *Client) CreateWebhook(ctx context.Context, in WebhookInput) (WebhookCreated, error) {
	var out WebhookCreated
	_, err := c.do(ctx, c.post("/v1/webhooks", in, false), &out)
	return out, err
}

// ListWebhooks lists the tenant's webhooks (without secrets).
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out WebhookList
	_, err := c.do(ctx, get("/v1/webhooks", nil), &out)
	return out.Webhooks, err
}

// DeleteWebhook deletes a webhook; its deliveries stop. A retry after a
// lost answer may find it gone: an *APIError with code not_found.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/webhooks/" + url.PathEscape(id), safe: true}, nil)
	return err
}

// ListWebhookDeliveries lists a webhook's latest 100 deliveries, newest
// first, with their attempts and last failure.
func (c *Client) ListWebhookDeliveries(ctx context.Context, id string) ([]WebhookDelivery, error) {
	var out WebhookDeliveryList
	_, err := c.do(ctx, get("/v1/webhooks/"+url.PathEscape(id)+"/deliveries", nil), &out)
	return out.Deliveries, err
}

// RotateWebhook makes a new secret for a webhook and returns the webhook
// with it, shown this once. The old secret keeps signing next to it for
// overlap (0 stops it at once; negative means the server's default of
// 24h), so a receiver can move to the new one without missing a delivery.
// Not retried: a second rotation would replace the secret returned by the
// first.
func (c *Client) RotateWebhook(ctx context.Context, id string, overlap time.Duration) (WebhookCreated, error) {
	var body any
	if overlap >= 0 {
		body = WebhookRotation{Overlap: overlap.String()}
	}
	var out WebhookCreated
	_, err := c.do(ctx, c.post("/v1/webhooks/"+url.PathEscape(id)+"/rotate", body, false), &out)
	return out, err
}

// EnableWebhook lets deliveries to a webhook disabled by a 410 Gone start
// again, from the next event on. Safe to retry.
func (c *Client) EnableWebhook(ctx context.Context, id string) (Webhook, error) {
	var out Webhook
	_, err := c.do(ctx, c.post("/v1/webhooks/"+url.PathEscape(id)+"/enable", nil, true), &out)
	return out, err
}
