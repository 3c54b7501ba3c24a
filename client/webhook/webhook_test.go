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
	body, err := json.Marshal(Event{ID: "evt_1", Type: EventVerdictFinal, ActionID: "a1", Sequence: 2,
		Verdict: commitlayer.Verdict{ActionID: "a1", Status: commitlayer.StatusPass, Version: 2}})
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
