// Package webhook signs and verifies CommitLayer's verdict webhooks, which
// follow the Standard Webhooks specification (standardwebhooks.com):
// every delivery is a POST with a JSON Event body, {"id", "type",
// "timestamp", "data": {"action_id", "sequence", "verdict"}}, and the headers
//
//	webhook-id:        the event's id (the same on every retry)
//	webhook-timestamp: unix seconds of this attempt
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//
// where key is the base64 part of the secret "whsec_<base64>". During a
// rotation the signature header holds one signature per secret, separated
// by spaces. Receivers de-duplicate by webhook-id: a delivery may arrive
// more than once, never out of order for one action.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every webhook secret.
const SecretPrefix = "whsec_"

// Event types a webhook subscribes to.
const (
	EventVerdictChanged = "verdict.changed" // a new verdict version, the first included
	EventVerdictFinal   = "verdict.final"   // the first verdict that is not provisional
)

// Events lists every event type.
var Events = []string{EventVerdictChanged, EventVerdictFinal}

// DefaultTolerance is the specification's replay window.
const DefaultTolerance = 5 * time.Minute

// Event is what a delivery tells. Body puts its content under data, as the
// specification recommends, and at the top level too for older receivers.
// Event's own JSON (how workflows pass it) is flat; UnmarshalJSON reads
// either.
type Event struct {
	ID   string `json:"id"` // the webhook-id header: de-duplicate by it
	Type string `json:"type"`
	// Timestamp is when the event occurred (Verdict.EvaluatedAt when zero),
	// not the attempt's time (webhook-timestamp).
	Timestamp time.Time `json:"timestamp,omitzero"`
	// Sequence is the verdict version the event is about.
	ActionID string              `json:"action_id"`
	Sequence int                 `json:"sequence"`
	Verdict  commitlayer.Verdict `json:"verdict"`
}

// EventData is an event's data on the wire.
type EventData struct {
	ActionID string              `json:"action_id"`
	Sequence int                 `json:"sequence"`
	Verdict  commitlayer.Verdict `json:"verdict"`
}

type body struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

type wire struct {
	body
	EventData
}

// Body is the event's body as delivered.
func (e Event) Body() ([]byte, error) {
	ts := e.Timestamp
	if ts.IsZero() {
		ts = e.Verdict.EvaluatedAt
	}
	d := EventData{ActionID: e.ActionID, Sequence: e.Sequence, Verdict: listed(e.Verdict)}
	return json.Marshal(wire{body: body{ID: e.ID, Type: e.Type, Timestamp: ts.UTC(), Data: d}, EventData: d})
}

// listed is v as the API answers it (api.viewVerdict).
func listed(v commitlayer.Verdict) commitlayer.Verdict {
	fs := make([]commitlayer.Finding, len(v.Findings))
	for i, f := range v.Findings {
		if f.Facts == nil {
			f.Facts = []string{}
		}
		if f.Hint == "" {
			f.Hint = commitlayer.Hint(f.Code)
		}
		fs[i] = f
	}
	v.Findings = fs
	if v.UnavailableSources == nil {
		v.UnavailableSources = []string{}
	}
	return v
}

// UnmarshalJSON reads a delivered body or Event's own flat JSON.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w struct {
		body
		Data *EventData `json:"data"`
		EventData
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	d := w.EventData
	if w.Data != nil {
		d = *w.Data
	}
	*e = Event{ID: w.ID, Type: w.Type, Timestamp: w.Timestamp,
		ActionID: d.ActionID, Sequence: d.Sequence, Verdict: d.Verdict}
	return nil
}

// Errors Verify returns (wrapped).
var (
	ErrBadSecret   = errors.New("secret is not whsec_<base64>")
	ErrNoSignature = errors.New("missing webhook-id, webhook-timestamp or a v1 signature")
	ErrMismatch    = errors.New("no signature matches the body")
	ErrTooOld      = errors.New("timestamp outside the tolerance")
)

// DecodeSecret returns the key of a "whsec_<base64>" secret (prefix optional).
func DecodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// Sign returns the signature "v1,<base64>" of body sent as msgID at t.
func Sign(secret, msgID string, t time.Time, body []byte) (string, error) {
	key, err := DecodeSecret(secret)
	if err != nil {
		return "", fmt.Errorf("webhook: %w", err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, msgID, strconv.FormatInt(t.Unix(), 10), body)), nil
}

// SetHeaders sets the three headers on h, signed with each of secrets.
func SetHeaders(h http.Header, secrets []string, msgID string, t time.Time, body []byte) error {
	if len(secrets) == 0 {
		return fmt.Errorf("webhook: %w: no secret to sign with", ErrBadSecret)
	}
	// A full stop would make "{id}.{timestamp}.{body}" ambiguous.
	if msgID == "" || strings.ContainsAny(msgID, ". \t\r\n") {
		return fmt.Errorf("webhook: message id %q: empty, or holds a full stop or a space", commitlayer.Clip(msgID, 64))
	}
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := Sign(s, msgID, t, body)
		if err != nil {
			return err
		}
		sigs = append(sigs, sig)
	}
	h.Set(HeaderID, msgID)
	h.Set(HeaderTimestamp, strconv.FormatInt(t.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	return nil
}

func mac(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a delivery's headers and raw body with the secret: a v1
// signature must match and webhook-timestamp be within tolerance of now
// (≤ 0: DefaultTolerance). Then it decodes the event.
func Verify(secret string, h http.Header, body []byte, tolerance time.Duration) (Event, error) {
	return VerifyAt(secret, h, body, tolerance, time.Now())
}

// VerifyAt is Verify at the time now.
func VerifyAt(secret string, h http.Header, body []byte, tolerance time.Duration, now time.Time) (Event, error) {
	if err := VerifySignature(secret, h, body, tolerance, now); err != nil {
		return Event{}, err
	}
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, fmt.Errorf("webhook: decode event: %w", err)
	}
	return e, nil
}

// VerifySignature is VerifyAt without decoding: any Standard Webhooks message.
func VerifySignature(secret string, h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	key, err := DecodeSecret(secret)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	id, ts, header := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || header == "" {
		return fmt.Errorf("webhook: %w", ErrNoSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: %w: webhook-timestamp %q is not unix seconds", ErrNoSignature, commitlayer.Clip(ts, 32))
	}
	want := mac(key, id, ts, body)
	found, matched := false, false
	for _, part := range strings.Fields(header) {
		v, s, ok := strings.Cut(part, ",")
		b, err := base64.StdEncoding.DecodeString(s)
		if !ok || v != "v1" || err != nil || len(b) != sha256.Size {
			continue
		}
		// Every signature compared, in constant time each.
		found, matched = true, hmac.Equal(b, want) || matched
	}
	if !found {
		return fmt.Errorf("webhook: %w", ErrNoSignature)
	}
	if !matched {
		return fmt.Errorf("webhook: %w", ErrMismatch)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook: %w: signed %s from now, tolerance %s", ErrTooOld, d.Round(time.Second), tolerance)
	}
	return nil
}
