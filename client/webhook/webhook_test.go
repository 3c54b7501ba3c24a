package webhook

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

func TestSignVerify(t *testing.T) {
	const secret = "whsec_0123456789abcdef"
	now := time.Unix(1_800_000_000, 0)
	body, err := json.Marshal(Event{ID: "evt_1", Type: EventVerdictFinal, ActionID: "a1", Sequence: 2,
		Verdict: commitlayer.Verdict{ActionID: "a1", Status: commitlayer.StatusPass, Version: 2}})
	require.NoError(t, err)
	h := Sign(secret, now, body)
	require.Regexp(t, `^t=1800000000,v1=[0-9a-f]{64}$`, h)

	e, err := VerifyAt(secret, h, body, time.Minute, now.Add(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, "evt_1", e.ID)
	require.Equal(t, commitlayer.StatusPass, e.Verdict.Status)

	_, err = VerifyAt(secret, h, append(body, ' '), time.Minute, now)
	require.ErrorIs(t, err, ErrMismatch, "a changed body")
	_, err = VerifyAt("whsec_other", h, body, time.Minute, now)
	require.ErrorIs(t, err, ErrMismatch, "another secret")
	_, err = VerifyAt(secret, h, body, time.Minute, now.Add(2*time.Minute))
	require.ErrorIs(t, err, ErrTooOld, "a replay after the window")
	_, err = VerifyAt(secret, h, body, time.Minute, now.Add(-2*time.Minute))
	require.ErrorIs(t, err, ErrTooOld, "a timestamp from the future")
	_, err = VerifyAt(secret, "t=1800000000", body, time.Minute, now)
	require.ErrorIs(t, err, ErrNoSignature)
	_, err = VerifyAt(secret, "v1=00", body, time.Minute, now)
	require.ErrorIs(t, err, ErrNoSignature)
	_, err = VerifyAt(secret, "", body, time.Minute, now)
	require.ErrorIs(t, err, ErrNoSignature)

	// The timestamp is signed: moving it breaks the signature.
	moved := "t=1800000060" + h[len("t=1800000000"):]
	_, err = VerifyAt(secret, moved, body, time.Minute, now.Add(time.Minute))
	require.ErrorIs(t, err, ErrMismatch)

	// Two signatures (a secret being rolled): one match is enough.
	both := h + ",v1=" + Sign("whsec_old", now, body)[len("t=1800000000,v1="):]
	_, err = VerifyAt(secret, both, body, time.Minute, now)
	require.NoError(t, err)
	_, err = VerifyAt("whsec_old", both, body, time.Minute, now)
	require.NoError(t, err)
}
