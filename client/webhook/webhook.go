// Package webhook signs and verifies CommitLayer's verdict webhooks, which
// follow the Standard Webhooks specification (standardwebhooks.com):
// every delivery is a POST with a JSON Event body, {"id", "type",
// "timestamp", "data": {"action_id", "sequence", "verdict"}}, and the headers
//
//	webhook-id:        the event's id (the same on every retry)
//	webhook-timestamp: unix seconds of this attempt
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//
// where key is the base64-decoded part of the webhook's secret
// "whsec_<base64>". While a secret is being rotated the signature header
// holds one signature per secret, separated by spaces; a receiver accepts
// the delivery when any of them matches its secret. Any Standard Webhooks
// library verifies these deliveries; so does Verify here. After verifying,
// a receiver de-duplicates by webhook-id (= Event.ID): a delivery may
// arrive more than once (a retry after a lost answer), never out of order
// for one action.
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

// The Standard Webhooks headers (lower case as the specification writes
// them; http.Header looks them up in any case).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every webhook secret.
const SecretPrefix = "whsec_"

// Event types a webhook subscribes to.
const (
	// EventVerdictChanged: a new verdict version (the first one included).
	EventVerdictChanged = "verdict.changed"
	// EventVerdictFinal: the action's first verdict that is not
	// provisional (its settlement window closed).
	EventVerdictFinal = "verdict.final"
)

// Events lists every event type.
var Events = []string{EventVerdictChanged, EventVerdictFinal}

// DefaultTolerance is the replay window Verify uses when given none: the
// specification's recommendation.
const DefaultTolerance = 5 * time.Minute

// Event is what a delivery tells. Its body on the wire (Body) has the
// shape the specification recommends, the event's content under data, and
// keeps the fields deliveries carried at the top level before data was
// added (receivers written against either shape read it):
//
//	{"id": "evt_…", "type": "verdict.final", "timestamp": "2026-03-01T12:00:00Z",
//	 "data": {"action_id": "…", "sequence": 2, "verdict": {…}},
//	 "action_id": "…", "sequence": 2, "verdict": {…}}
//
// Event's own JSON (the struct tags: how workflows and activities pass it,
// readable by every build) is flat; UnmarshalJSON reads either.
type Event struct {
	// ID is the same on every delivery of this event (to every webhook,
	// on every retry), and is the webhook-id header: de-duplicate by it.
	ID   string `json:"id"`
	Type string `json:"type"`
	// Timestamp is when the event occurred: its verdict's evaluation
	// (Verdict.EvaluatedAt when zero). It is not the attempt's time,
	// which webhook-timestamp carries.
	Timestamp time.Time `json:"timestamp,omitzero"`
	// ActionID and Sequence order an action's events: Sequence is the
	// verdict version the event is about.
	ActionID string              `json:"action_id"`
	Sequence int                 `json:"sequence"`
	Verdict  commitlayer.Verdict `json:"verdict"`
}

// EventData is an event's data on the wire: the action and its verdict.
type EventData struct {
	ActionID string              `json:"action_id"`
	Sequence int                 `json:"sequence"`
	Verdict  commitlayer.Verdict `json:"verdict"`
}

// body is the wire shape.
type body struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// wire is the delivered body: body, and data's fields again at the top
// level, where deliveries carried them before data (extended, not renamed).
type wire struct {
	body
	EventData
}

// Body is the event's body as delivered: {id, type, timestamp, data} and,
// as before data, action_id, sequence and verdict at the top level.
func (e Event) Body() ([]byte, error) {
	ts := e.Timestamp
	if ts.IsZero() {
		ts = e.Verdict.EvaluatedAt
	}
	d := EventData{ActionID: e.ActionID, Sequence: e.Sequence, Verdict: listed(e.Verdict)}
	return json.Marshal(wire{body: body{ID: e.ID, Type: e.Type, Timestamp: ts.UTC(), Data: d}, EventData: d})
}

// listed is v with its empty lists as [] rather than null, and every
// finding's hint, as the API answers a verdict (api.viewVerdict).
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

// UnmarshalJSON reads a delivered body (data present) or Event's own
// flat JSON.
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

// DecodeSecret returns the signing key of a "whsec_<base64>" secret (the
// prefix is optional, as in the specification's libraries).
func DecodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// Sign returns the signature "v1,<base64>" of body sent as message msgID
// at t, with secret.
func Sign(secret, msgID string, t time.Time, body []byte) (string, error) {
	key, err := DecodeSecret(secret)
	if err != nil {
		return "", fmt.Errorf("webhook: %w", err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, msgID, strconv.FormatInt(t.Unix(), 10), body)), nil
}

// SetHeaders sets the three headers on h for body sent as msgID at t,
// signed with each of secrets (the current one first; during a rotation
// the previous one too).
func SetHeaders(h http.Header, secrets []string, msgID string, t time.Time, body []byte) error {
	if len(secrets) == 0 {
		return fmt.Errorf("webhook: %w: no secret to sign with", ErrBadSecret)
	}
	// The specification: the id must not hold a full stop, which would
	// make "{id}.{timestamp}.{body}" ambiguous.
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

// Verify checks a delivery with the webhook's secret: h holds the
// request's headers and body its raw body. It accepts when a v1 signature
// in webhook-signature matches (several may be present while a secret is
// rotated; other versions are ignored) and webhook-timestamp is within
// tolerance of now either way (a tolerance ≤ 0 means DefaultTolerance),
// then decodes the event.
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

// VerifySignature is VerifyAt without decoding the body: it checks any
// Standard Webhooks message.
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
