package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// WebhookInput is the body of CreateWebhook.
type WebhookInput struct {
	URL    string   `json:"url"`
	Events []string `json:"events"` // webhook.Events
}

// Webhook is a verdict webhook.
type Webhook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"created_at"`
	// The secret the last rotation replaced signs until PreviousSecretUntil.
	RotatedAt           *time.Time `json:"rotated_at,omitempty"`
	PreviousSecretUntil *time.Time `json:"previous_secret_until,omitempty"`
	// Enabled is false once the receiver answered 410 Gone, until EnableWebhook.
	Enabled        bool       `json:"enabled"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
}

// WebhookCreated is a webhook with its secret, which is not shown again.
type WebhookCreated struct {
	Webhook
	Secret string `json:"secret"`
}

// WebhookRotation is the body of RotateWebhook: how long the old secret
// keeps signing (a Go duration).
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
	// Status: pending, delivered, failing (retried for 24 h) or failed.
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	LastStatus *int       `json:"last_status"`
	LastError  string     `json:"last_error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	Delivered  *time.Time `json:"delivered_at"`
}

// CreateWebhook subscribes a URL to verdict events; retried only when the
// server surely did not act.
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

// DeleteWebhook deletes a webhook (a retry may find it gone: not_found).
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/webhooks/" + url.PathEscape(id), safe: true}, nil)
	return err
}

// ListWebhookDeliveries lists a webhook's latest 100 deliveries, newest first.
func (c *Client) ListWebhookDeliveries(ctx context.Context, id string) ([]WebhookDelivery, error) {
	var out WebhookDeliveryList
	_, err := c.do(ctx, get("/v1/webhooks/"+url.PathEscape(id)+"/deliveries", nil), &out)
	return out.Deliveries, err
}

// RotateWebhook makes a new secret; the old one keeps signing for overlap
// (negative: the server's default). Not retried: a second rotation would
// replace the secret returned.
func (c *Client) RotateWebhook(ctx context.Context, id string, overlap time.Duration) (WebhookCreated, error) {
	var body any
	if overlap >= 0 {
		body = WebhookRotation{Overlap: overlap.String()}
	}
	var out WebhookCreated
	_, err := c.do(ctx, c.post("/v1/webhooks/"+url.PathEscape(id)+"/rotate", body, false), &out)
	return out, err
}

// EnableWebhook resumes deliveries to a webhook a 410 Gone disabled.
func (c *Client) EnableWebhook(ctx context.Context, id string) (Webhook, error) {
	var out Webhook
	_, err := c.do(ctx, c.post("/v1/webhooks/"+url.PathEscape(id)+"/enable", nil, true), &out)
	return out, err
}
