package stripe_test

import (
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	stripeconn "github.com/commitlayer/commitlayer/connectors/stripe"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

func TestSealAndOpenKey(t *testing.T) {
	raw := make([]byte, 32)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	box, err := secrets.FromEnv(func(string) string { return base64.StdEncoding.EncodeToString(raw) })
	require.NoError(t, err)

	sealed, hint, err := stripeconn.SealKey(box, "t1", "conn_1", readKey)
	require.NoError(t, err)
	require.Equal(t, "…6789", hint)
	require.NotContains(t, sealed, readKey)
	got, err := stripeconn.OpenKey(box, "t1", "conn_1", sealed)
	require.NoError(t, err)
	require.Equal(t, readKey, got)
	_, err = stripeconn.OpenKey(box, "t1", "conn_2", sealed)
	require.ErrorIs(t, err, secrets.ErrOpen, "bound to its connector")
	_, err = stripeconn.OpenKey(box, "t2", "conn_1", sealed)
	require.ErrorIs(t, err, secrets.ErrOpen, "bound to its tenant")

	tests := []struct {
		name string
		box  *secrets.Box
		key  string
		err  error
	}{
		{"live secret key", box, "sk_live_abcdef123456", stripeconn.ErrLiveSecretKey},
		{"not a key", box, "hello", stripeconn.ErrBadKey},
		{"no secrets key", nil, readKey, secrets.ErrNoKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := stripeconn.SealKey(tc.box, "t1", "conn_1", tc.key)
			require.ErrorIs(t, err, tc.err)
			require.NotContains(t, err.Error(), tc.key)
		})
	}
}
