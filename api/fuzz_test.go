package api

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireClientError checks that a decoding error is an *apiError with a
// 4xx status and a code, never a 500 or a bare error.
func requireClientError(t *testing.T, err error) {
	t.Helper()
	var ae *apiError
	require.True(t, errors.As(err, &ae), "not a client error: %v", err)
	require.GreaterOrEqual(t, ae.Status, 400)
	require.Less(t, ae.Status, 500)
	require.NotEmpty(t, ae.Code)
	require.NotEmpty(t, ae.Message)
}

func FuzzDecodeFacts(f *testing.F) {
	for _, s := range []string{
		`{"facts":[{"source":"ledger","type":"payout_sent","subject":"account:acc_1","external_id":"l-1","occurred_at":"2026-11-29T10:00:00Z","attrs":{"amount":2500,"currency":"USD"},"links":["order:o_1"]}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00.123456789+05:30","attrs":{"n":1.5,"m":[1,{"k":null}],"b":true}}]}`,
		`{"facts":[]}`, `{"facts":null}`, `{}`, `[]`, `null`, ``, `{"facts":[{}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","attrs":{"n":1e999}}]}`,
		`{"facts":[{"source":"a","type":"t\u0000","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","seq":5,"extra":1}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-13-29T10:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","links":["x"]}]} trailing`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","attrs":{"k":1,"k":2}}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","external_id":"y","occurred_at":"2026-11-29T10:00:00Z"}],"facts":[]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"9999-12-31T23:59:59Z","attrs":{"a":[{"k":1},{"k":1}]}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		facts, err := decodeFacts(bytes.NewReader(body), futureBound{})
		if err != nil {
			requireClientError(t, err)
			return
		}
		require.NotEmpty(t, facts)
		for i := range facts {
			require.NoError(t, facts[i].Validate(), "fact %d passed decoding", i)
			require.NotNil(t, facts[i].Attrs)
			require.Zero(t, facts[i].Seq)
		}
	})
}

func FuzzDecodeAction(f *testing.F) {
	for _, s := range []string{
		`{"contract":"send_payout","agent":"a","subject":"account:acc_1","params":{"amount":2500,"currency":"USD"},"claim":{"status":"success","message":"ok"},"trace":[{"tool":"x"}]}`,
		`{"id":"my-1","contract":"c","contract_version":2,"agent":"a","subject":"a:b","requested_at":"2026-11-29T10:00:00Z"}`,
		`{"contract":"c","agent":"a","subject":"nope"}`, `{"contract":"c","agent":"a","subject":"a:b","trace":{}}`,
		`{"contract":"c","agent":"a","subject":"a:b","params":[]}`, `{"contract":"c","agent":"a","subject":"a:b","contract_version":-3}`,
		`{"contract":"c","agent":"a","subject":"a:b","claim":{"status":"\u0000"}}`, `{}`, `[]`, ``, `null`, `{"contract":5}`,
		`{"contract":"c","agent":"a","subject":"a:b","params":{"x":1e400}}`,
		`{"contract":"c","agent":"a","subject":"a:b","requested_at":"0001-01-01T00:00:00Z"}`,
		`{"contract":"c","agent":"a","subject":"a:b","requested_at":null,"params":{"a":{"k":1},"b":{"k":1}}}`,
		`{"contract":"c","agent":"a","subject":"a:b","params":{"k":1,"\u006b":2},"trace":[{"t":1,"t":2}]}`,
		`{"contract":"c","agent":"a","subject":"a:b","requested_at":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := decodeAction(bytes.NewReader(body), futureBound{})
		if err != nil {
			requireClientError(t, err)
			return
		}
		require.Len(t, a.Hash, 32)
		act := a.Action
		require.True(t, act.RequestedAt.IsZero() || !act.RequestedAt.Before(minTime), "requested_at %s", act.RequestedAt)
		if act.RequestedAt.IsZero() {
			act.RequestedAt = act.RequestedAt.Add(1)
		}
		require.NoError(t, act.Validate())
		require.NotNil(t, act.Params)
		// Decoding is deterministic: the same bytes hash the same.
		again, err := decodeAction(bytes.NewReader(body), futureBound{})
		require.NoError(t, err)
		require.Equal(t, a.Hash, again.Hash)
	})
}

// TestActionHashIsStable pins the idempotency hash of two bodies: a
// retry answered after an upgrade hashes as the first request did before
// it, or the stored action would answer 409.
func TestActionHashIsStable(t *testing.T) {
	for body, want := range map[string]string{
		`{"contract":"send_payout","agent":"a","subject":"account:acc_1"}`: "e55ffb2f1d117176b481f72afd20807e8419e7a22763797a1670165501bbe8ba",
		`{"id":"my-1","contract":"c","contract_version":2,"agent":"a <&> \u2028","subject":"a:b","requested_at":"2026-11-29T10:00:00.5+01:00",
		  "params":{"z":1,"a":2500.0,"f":0.000001,"g":1e-7,"h":1e15,"h2":-2.5e-10,"i":123456.789,"n":null,"b":true,"s":"x<y>&\u2029","m":{"y":[1,"2",{"k":-0}]}},
		  "claim":{"status":"success","message":"ok"},
		  "trace":[{"tool":"refund","args":{"z":12345678901234567890,"a":1.50,"big":1e400},"id":"<a>"},{"b":2,"a":1}]}`: "22195cfe31dd8fa19bc5082d86d64180f2925d910828835565e11e3305f60420",
	} {
		r, err := decodeAction(strings.NewReader(body), futureBound{})
		require.NoError(t, err)
		require.Equal(t, want, hex.EncodeToString(r.Hash), body)
	}
}
