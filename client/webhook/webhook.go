// Package webhook signs and verifies CommitLayer's verdict webhooks.
//
// Every delivery is a POST with a JSON Event body and the header
//
//	CommitLayer-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>
//
// like Stripe's Stripe-Signature. A receiver calls Verify with the secret it
// was shown once when the webhook was created, the header, the raw body and
// a tolerance (the replay window), then de-duplicates by Event.ID: a
// delivery may arrive more than once (a retry after a lost answer), never
// out of order for one action.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// Header is the signature header's name.
const Header = "CommitLayer-Signature"

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

// DefaultTolerance is the replay window Verify callers should use unless
// they have a reason not to.
const DefaultTolerance = 5 * time.Minute

// Event is a delivery's body.
type Event struct {
	// ID is the same on every delivery of this event (to every webhook,
	// on every retry): de-duplicate by it.
	ID   string `json:"id"`
	Type string `json:"type"`
	// ActionID and Sequence order an action's events: Sequence is the
	// verdict version the event is about.
	ActionID string              `json:"action_id"`
	Sequence int                 `json:"sequence"`
	Verdict  commitlayer.Verdict `json:"verdict"`
}

// Errors Verify returns (wrapped).
var (
	ErrNoSignature = errors.New("no valid v1 signature in the header")
	ErrMismatch    = errors.New("signature does not match the body")
	ErrTooOld      = errors.New("timestamp outside the tolerance")
)

// Sign returns the header value for body signed with secret at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a delivery: header is the CommitLayer-Signature value, body
// the raw request body. It accepts when one v1 signature matches (several
// may be present while a secret is rolled) and the timestamp is within
// tolerance of now (a tolerance ≤ 0 means DefaultTolerance), then decodes
// the event.
func Verify(secret, header string, body []byte, tolerance time.Duration) (Event, error) {
	return VerifyAt(secret, header, body, tolerance, time.Now())
}

// VerifyAt is Verify at the time now.
func VerifyAt(secret, header string, body []byte, tolerance time.Duration, now time.Time) (Event, error) {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if ts == "" || err != nil {
		return Event{}, fmt.Errorf("webhook: %w: no t=<unix seconds>", ErrNoSignature)
	}
	if len(sigs) == 0 {
		return Event{}, fmt.Errorf("webhook: %w", ErrNoSignature)
	}
	want := mac(secret, ts, body)
	matched := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			matched = true
		}
	}
	if !matched {
		return Event{}, fmt.Errorf("webhook: %w", ErrMismatch)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return Event{}, fmt.Errorf("webhook: %w: signed %s ago, tolerance %s", ErrTooOld, d.Round(time.Second), tolerance)
	}
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, fmt.Errorf("webhook: decode event: %w", err)
	}
	return e, nil
}
