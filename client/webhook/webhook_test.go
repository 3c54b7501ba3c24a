package webhook

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// The specification's published example (standardwebhooks.com, "Verifying
// signatures"; the same vector the reference libraries test).
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func specHeaders(sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, specID)
	h.Set(HeaderTimestamp, "1614265330")
	h.Set(HeaderSignature, sig)
	return h
}

func TestSpecificationExample(t *testing.T) {
	at := time.Unix(specTimestamp, 0)
	sig, err := Sign(specSecret, specID, at, []byte(specBody))
	require.NoError(t, err)
	require.Equal(t, specSignature, sig, "Sign computes the specification's signature")

	h := http.Header{}
	require.NoError(t, SetHeaders(h, []string{specSecret}, specID, at, []byte(specBody)))
	require.Equal(t, specHeaders(specSignature), h)

	require.NoError(t, VerifySignature(specSecret, specHeaders(specSignature), []byte(specBody), 0, at.Add(4*time.Minute)))
	// The secret without its prefix, as the libraries accept it.
	require.NoError(t, VerifySignature(specSecret[len(SecretPrefix):], specHeaders(specSignature), []byte(specBody), 0, at))

	// Past the default five minutes, either way.
	err = VerifySignature(specSecret, specHeaders(specSignature), []byte(specBody), 0, at.Add(6*time.Minute))
	require.ErrorIs(t, err, ErrTooOld)
	err = VerifySignature(specSecret, specHeaders(specSignature), []byte(specBody), 0, at.Add(-6*time.Minute))
	require.ErrorIs(t, err, ErrTooOld)
	// Another body, id or timestamp.
	err = VerifySignature(specSecret, specHeaders(specSignature), []byte(`{"test": 2432232315}`), 0, at)
	require.ErrorIs(t, err, ErrMismatch)
	h = specHeaders(specSignature)
	h.Set(HeaderID, "msg_other")
	require.ErrorIs(t, VerifySignature(specSecret, h, []byte(specBody), 0, at), ErrMismatch)
	h = specHeaders(specSignature)
	h.Set(HeaderTimestamp, "1614265331")
	require.ErrorIs(t, VerifySignature(specSecret, h, []byte(specBody), 0, at), ErrMismatch)
}

func TestSeveralSignatures(t *testing.T) {
	at := time.Unix(specTimestamp, 0)
	const other = "whsec_" + "c2VjcmV0LW9mLWFub3RoZXItd2ViaG9vaw==" // "secret-of-another-webhook"
	// A rotation: the new secret's signature first, then the old one's;
	// unknown versions and junk are skipped.
	for _, header := range []string{
		"v1,bm90IGl0 " + specSignature,
		specSignature + " v1,bm90IGl0",
		"v2,abc v1a,xyz " + specSignature,
	} {
		require.NoError(t, VerifySignature(specSecret, specHeaders(header), []byte(specBody), 0, at), header)
	}
	h := http.Header{}
	require.NoError(t, SetHeaders(h, []string{other, specSecret}, specID, at, []byte(specBody)))
	require.NoError(t, VerifySignature(specSecret, h, []byte(specBody), 0, at), "the old secret still verifies")
	require.NoError(t, VerifySignature(other, h, []byte(specBody), 0, at), "the new secret verifies")
	require.Regexp(t, `^v1,\S+ v1,\S+$`, h.Get(HeaderSignature))
}

func TestRefusals(t *testing.T) {
	at := time.Unix(specTimestamp, 0)
	for name, h := range map[string]http.Header{
		"no headers":       {},
		"no id":            func() http.Header { h := specHeaders(specSignature); h.Del(HeaderID); return h }(),
		"no timestamp":     func() http.Header { h := specHeaders(specSignature); h.Del(HeaderTimestamp); return h }(),
		"bad timestamp":    func() http.Header { h := specHeaders(specSignature); h.Set(HeaderTimestamp, "soon"); return h }(),
		"no v1":            specHeaders("v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
		"short signature":  specHeaders("v1,AAAA"),
		"not base64":       specHeaders("v1,***"),
		"old CommitLayer ": specHeaders("t=1614265330,v1=abcd"),
	} {
		require.ErrorIs(t, VerifySignature(specSecret, h, []byte(specBody), 0, at), ErrNoSignature, name)
	}
	require.ErrorIs(t, VerifySignature("whsec_***", specHeaders(specSignature), []byte(specBody), 0, at), ErrBadSecret)
	_, err := Sign("whsec_", specID, at, nil)
	require.ErrorIs(t, err, ErrBadSecret)
	require.ErrorIs(t, SetHeaders(http.Header{}, nil, specID, at, nil), ErrBadSecret)
}

func TestVerifyDecodesTheEvent(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body, err := Event{ID: "evt_1", Type: EventVerdictFinal, ActionID: "a1", Sequence: 2,
		Verdict: commitlayer.Verdict{ActionID: "a1", Status: commitlayer.StatusPass, Version: 2}}.Body()
	require.NoError(t, err)
	h := http.Header{}
	require.NoError(t, SetHeaders(h, []string{specSecret}, "evt_1", now, body))
	e, err := VerifyAt(specSecret, h, body, time.Minute, now.Add(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, "evt_1", e.ID)
	require.Equal(t, commitlayer.StatusPass, e.Verdict.Status)
	_, err = VerifyAt(specSecret, h, body, time.Minute, now.Add(2*time.Minute))
	require.ErrorIs(t, err, ErrTooOld, "a replay after the window")
	_, err = VerifyAt(specSecret, h, append(body, ' '), time.Minute, now)
	require.ErrorIs(t, err, ErrMismatch)
}

// The body has the shape the specification recommends: type, timestamp
// (when the event occurred, RFC 3339) and data, with data's fields again at
// the top level where earlier builds delivered them; an earlier build's
// flat body still decodes.
func TestEventWireShape(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 500, time.FixedZone("CET", 3600))
	e := Event{ID: "evt_1", Type: EventVerdictFinal, ActionID: "a1", Sequence: 2,
		Verdict: commitlayer.Verdict{ActionID: "a1", Status: commitlayer.StatusPass, Version: 2, EvaluatedAt: at}}
	body, err := e.Body()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	require.ElementsMatch(t, []string{"id", "type", "timestamp", "data", "action_id", "sequence", "verdict"}, keys(m),
		"the specification's shape, and the fields earlier deliveries carried at the top level (extended, not renamed)")
	require.Equal(t, "verdict.final", m["type"])
	require.Equal(t, "2026-03-01T11:00:00.0000005Z", m["timestamp"], "the verdict's evaluation, in UTC")
	data := m["data"].(map[string]any)
	require.Equal(t, "a1", data["action_id"])
	require.Equal(t, float64(2), data["sequence"])
	require.Equal(t, "PASS", data["verdict"].(map[string]any)["status"])
	require.Equal(t, "a1", m["action_id"], "as before data: a receiver reading body.verdict still works")
	require.Equal(t, float64(2), m["sequence"])
	require.Equal(t, data["verdict"], m["verdict"])
	require.Contains(t, string(body), `"findings":[]`, "lists as the API answers them, never null")
	require.Contains(t, string(body), `"unavailable_sources":[]`)

	var back Event
	require.NoError(t, json.Unmarshal(body, &back))
	require.Equal(t, "evt_1", back.ID)
	require.Equal(t, 2, back.Sequence)
	require.True(t, at.Equal(back.Timestamp))
	require.Equal(t, commitlayer.StatusPass, back.Verdict.Status)

	// An explicit timestamp wins over the verdict's.
	e.Timestamp = at.Add(time.Hour)
	body, err = e.Body()
	require.NoError(t, err)
	require.Contains(t, string(body), `"timestamp":"2026-03-01T12:00:00.0000005Z"`)

	// Event's own JSON (how workflows pass it, and how builds before the
	// wire shape wrote it) is flat, and round-trips.
	var old Event
	require.NoError(t, json.Unmarshal([]byte(`{"id":"evt_0","type":"verdict.changed","action_id":"a0","sequence":1,
		"verdict":{"action_id":"a0","status":"FAIL","version":1}}`), &old))
	require.Equal(t, Event{ID: "evt_0", Type: EventVerdictChanged, ActionID: "a0", Sequence: 1,
		Verdict: commitlayer.Verdict{ActionID: "a0", Status: commitlayer.StatusFail, Version: 1}}, old)
	own, err := json.Marshal(old)
	require.NoError(t, err)
	require.NotContains(t, string(own), "timestamp", "no timestamp when none was set: an older build reads it as it wrote it")
	var again Event
	require.NoError(t, json.Unmarshal(own, &again))
	require.Equal(t, old, again)
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A message id with a full stop would make the signed content ambiguous.
func TestMessageIDWithoutFullStop(t *testing.T) {
	for _, id := range []string{"", "evt.1", "evt 1"} {
		require.Error(t, SetHeaders(http.Header{}, []string{specSecret}, id, time.Unix(specTimestamp, 0), nil), id)
	}
}
