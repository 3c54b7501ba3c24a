package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/client/webhook"
	"github.com/commitlayer/commitlayer/internal/netguard"
)

// WebhookStore keeps webhooks and deliveries; *postgres.DB has it. Without
// it the webhook routes answer 503.
type WebhookStore interface {
	CreateWebhook(ctx context.Context, tenantID string, w commitlayer.Webhook) (commitlayer.Webhook, error)
	ListWebhooks(ctx context.Context, tenantID string) ([]commitlayer.Webhook, error)
	GetWebhook(ctx context.Context, tenantID, id string) (commitlayer.Webhook, error)
	DeleteWebhook(ctx context.Context, tenantID, id string) error
	ListDeliveries(ctx context.Context, tenantID, webhookID string, limit int) ([]commitlayer.WebhookDelivery, error)
	RotateWebhook(ctx context.Context, tenantID, id, sealed string, at, previousUntil time.Time) (commitlayer.Webhook, error)
	EnableWebhook(ctx context.Context, tenantID, id string) (commitlayer.Webhook, error)
}

// Webhook bounds.
const (
	maxWebhooks      = 20 // per tenant
	maxWebhookURL    = 2048
	deliveriesListed = 100 // the latest, newest first
	// How long a rotated-out secret keeps signing: by default, and at most.
	DefaultRotationOverlap = 24 * time.Hour
	MaxRotationOverlap     = 7 * 24 * time.Hour
)

// viewWebhook leaves out a previous secret's end that is before now.
func viewWebhook(w commitlayer.Webhook, now time.Time) client.Webhook {
	v := client.Webhook{ID: w.ID, URL: w.URL, Events: w.Events, CreatedAt: w.CreatedAt.UTC(), RotatedAt: timePtr(w.RotatedAt),
		Enabled: w.DisabledAt.IsZero(), DisabledAt: timePtr(w.DisabledAt), DisabledReason: w.DisabledReason}
	if w.PreviousUntil.After(now) {
		v.PreviousSecretUntil = timePtr(w.PreviousUntil)
	}
	return v
}

func (s *Server) webhookStore() (WebhookStore, error) {
	if s.webhooks == nil {
		return nil, errorf(http.StatusServiceUnavailable, codeUnavailable, "webhooks are not enabled on this server")
	}
	return s.webhooks, nil
}

// webhookOf is webhookStore and the path's id (404 for an unstorable one).
func (s *Server) webhookOf(r *http.Request) (WebhookStore, string, error) {
	ws, err := s.webhookStore()
	if err != nil {
		return nil, "", err
	}
	id := r.PathValue("id")
	if !storable(id) {
		return nil, "", notFound("webhook", id)
	}
	return ws, id, nil
}

// postWebhook registers a webhook: 201 with its secret, shown once.
func (s *Server) postWebhook(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.webhookStore()
	if err != nil {
		return err
	}
	var in client.WebhookInput
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), &in); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return errorf(http.StatusBadRequest, codeInvalidRequest, format, args...)
	}
	switch {
	case in.URL == "":
		return bad("url: is required")
	case len(in.URL) > maxWebhookURL:
		return bad("url: must be at most %d bytes", maxWebhookURL)
	case len(in.Events) == 0:
		return bad("events: give one or more of %s", strings.Join(webhook.Events, ", "))
	}
	events := []string{}
	for i, e := range in.Events {
		if !slices.Contains(webhook.Events, e) {
			return bad("events[%d]: %q is not an event; use %s", i, commitlayer.Clip(e, 64), strings.Join(webhook.Events, ", "))
		}
		if !slices.Contains(events, e) {
			events = append(events, e)
		}
	}
	if s.guard != nil {
		if _, err := s.guard.CheckURL(r.Context(), in.URL); err != nil {
			// Only the class: the reason may name a resolved address.
			return errorf(http.StatusUnprocessableEntity, codeAddressNotAllowed, "url: %s", netguard.Classify(err))
		}
	} else if !strings.HasPrefix(in.URL, "https://") && !strings.HasPrefix(in.URL, "http://") {
		return bad("url: must be an http or https URL")
	}
	if s.secrets == nil {
		return errNoSecretsKey
	}
	tenantID := tenantOf(r.Context()).ID
	existing, err := ws.ListWebhooks(r.Context(), tenantID)
	if err != nil {
		return fmt.Errorf("list webhooks: %w", err)
	}
	if len(existing) >= maxWebhooks {
		return errorf(http.StatusConflict, codeConflict, "a tenant has at most %d webhooks; delete one first", maxWebhooks)
	}
	id := commitlayer.NewID("wh_")
	secret, sealed, err := s.newWebhookSecret(tenantID, id)
	if err != nil {
		return err
	}
	created, err := ws.CreateWebhook(r.Context(), tenantID, commitlayer.Webhook{ID: id, URL: in.URL, Events: events, Secret: sealed})
	if err != nil {
		return fmt.Errorf("create webhook: %w", err)
	}
	w.Header().Set("Location", "/v1/webhooks/"+id)
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, client.WebhookCreated{Webhook: viewWebhook(created, time.Time{}), Secret: secret})
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.webhookStore()
	if err != nil {
		return err
	}
	list, err := ws.ListWebhooks(r.Context(), tenantOf(r.Context()).ID)
	if err != nil {
		return fmt.Errorf("list webhooks: %w", err)
	}
	now := s.now()
	return writeJSON(w, http.StatusOK, client.WebhookList{Webhooks: views(list, func(h commitlayer.Webhook) client.Webhook {
		return viewWebhook(h, now)
	})})
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	ws, id, err := s.webhookOf(r)
	if err != nil {
		return err
	}
	if err := storeErr(ws.DeleteWebhook(r.Context(), tenantOf(r.Context()).ID, id), "delete", "webhook", id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// webhookDeliveries answers the latest deliveries, newest first.
func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	ws, id, err := s.webhookOf(r)
	if err != nil {
		return err
	}
	tenantID := tenantOf(r.Context()).ID
	if _, err := ws.GetWebhook(r.Context(), tenantID, id); err != nil {
		return storeErr(err, "get", "webhook", id)
	}
	ds, err := ws.ListDeliveries(r.Context(), tenantID, id, deliveriesListed)
	if err != nil {
		return fmt.Errorf("list deliveries: %w", err)
	}
	out := client.WebhookDeliveryList{Deliveries: []client.WebhookDelivery{}}
	for _, d := range ds {
		v := client.WebhookDelivery{EventID: d.EventID, Type: d.EventType, ActionID: d.ActionID, Sequence: d.Sequence,
			Status: d.Status, Attempts: d.Attempts, LastError: d.LastError, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
			Delivered: timePtr(d.DeliveredAt)}
		if d.LastStatus != 0 {
			st := d.LastStatus
			v.LastStatus = &st
		}
		out.Deliveries = append(out.Deliveries, v)
	}
	return writeJSON(w, http.StatusOK, out)
}

var errNoSecretsKey = errorf(http.StatusServiceUnavailable, codeUnavailable,
	"webhooks need COMMITLAYER_SECRETS_KEY on the server to keep their secrets sealed")

// newWebhookSecret makes a Standard Webhooks secret (whsec_ and 32 random
// bytes in base64) and seals it for the store.
func (s *Server) newWebhookSecret(tenantID, id string) (secret, sealed string, err error) {
	if s.secrets == nil {
		return "", "", errNoSecretsKey
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	secret = webhook.SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
	if sealed, err = s.secrets.Seal([]byte(secret), commitlayer.WebhookSecretAD(tenantID, id)); err != nil {
		return "", "", fmt.Errorf("seal webhook secret: %w", err)
	}
	return secret, sealed, nil
}

// rotateWebhook makes a new secret, answered once. The replaced one keeps
// signing for the overlap so receivers miss no delivery; one still in an
// earlier rotation's overlap stops at once. The body is optional.
func (s *Server) rotateWebhook(w http.ResponseWriter, r *http.Request) error {
	ws, id, err := s.webhookOf(r)
	if err != nil {
		return err
	}
	tenantID := tenantOf(r.Context()).ID
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return jsonError(err)
	}
	overlap := DefaultRotationOverlap
	if len(bytes.TrimSpace(data)) > 0 {
		var in client.WebhookRotation
		if err := decodeJSON(bytes.NewReader(data), &in); err != nil {
			return err
		}
		if in.Overlap != "" {
			d, err := time.ParseDuration(in.Overlap)
			if err != nil || d < 0 || d > MaxRotationOverlap {
				return errorf(http.StatusBadRequest, codeInvalidRequest,
					"overlap: must be a duration from 0s to %s (e.g. \"24h\"), got %q", MaxRotationOverlap, commitlayer.Clip(in.Overlap, 32))
			}
			overlap = d
		}
	}
	secret, sealed, err := s.newWebhookSecret(tenantID, id)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	rotated, err := ws.RotateWebhook(r.Context(), tenantID, id, sealed, now, now.Add(overlap))
	if err != nil {
		return storeErr(err, "rotate", "webhook", id)
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, client.WebhookCreated{Webhook: viewWebhook(rotated, now), Secret: secret})
}

// enableWebhook resumes deliveries to a webhook a 410 Gone disabled.
func (s *Server) enableWebhook(w http.ResponseWriter, r *http.Request) error {
	ws, id, err := s.webhookOf(r)
	if err != nil {
		return err
	}
	enabled, err := ws.EnableWebhook(r.Context(), tenantOf(r.Context()).ID, id)
	if err != nil {
		return storeErr(err, "enable", "webhook", id)
	}
	return writeJSON(w, http.StatusOK, viewWebhook(enabled, s.now()))
}
