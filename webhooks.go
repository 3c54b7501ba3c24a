package commitlayer

import "time"

// Webhook is a tenant's subscription to verdict events: each event of the
// types in Events is POSTed to URL, signed with the webhook's secret.
type Webhook struct {
	ID        string
	TenantID  string
	URL       string
	Events    []string
	Secret    string // sealed; never shown after creation
	CreatedAt time.Time
	// RotatedAt is the last rotation (zero if never); the secret it
	// replaced still signs, next to Secret, until PreviousUntil.
	RotatedAt     time.Time
	PreviousUntil time.Time
	// DisabledAt is when deliveries stopped (zero while enabled): its receiver
	// answered 410 Gone, as Standard Webhooks asks; DisabledReason says why.
	DisabledAt     time.Time
	DisabledReason string
}

// WebhookSecretAD is the associated data a webhook secret is sealed with.
func WebhookSecretAD(tenantID, webhookID string) []byte {
	return []byte("webhook-secret\x00" + tenantID + "\x00" + webhookID)
}

// Delivery states.
const (
	DeliveryPending   = "pending"   // not attempted yet
	DeliveryDelivered = "delivered" // a 2xx answer
	DeliveryFailing   = "failing"   // the last attempt failed; retried with backoff for 24 h
	DeliveryFailed    = "failed"    // given up: its webhook was disabled (410 Gone), or its 24 h of retries are over
)

// WebhookDelivery is one event's delivery to one webhook.
type WebhookDelivery struct {
	WebhookID   string
	EventID     string
	EventType   string
	ActionID    string
	Sequence    int
	Status      string
	Attempts    int
	LastStatus  int // of the last attempt; 0 when it got no answer (LastError says why)
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeliveredAt time.Time // zero until delivered
}

// WebhookTarget is where to send a pending delivery and the sealed secrets to sign it.
type WebhookTarget struct {
	WebhookID string
	URL       string
	Secret    string // sealed
	// Previous is the sealed secret a rotation replaced while it still signs.
	Previous string
}
