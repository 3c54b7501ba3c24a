package secrets_test

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/secrets"
)

func key(t *testing.T) string {
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func env(v string) func(string) string {
	return func(name string) string {
		if name == secrets.EnvKey {
			return v
		}
		return ""
	}
}

func TestFromEnv(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	tests := []struct {
		name string
		val  string
		err  error
	}{
		{"unset", "", secrets.ErrNoKey},
		{"not base64", "not base64 at all!", secrets.ErrBadKey},
		{"16 bytes", short, secrets.ErrBadKey},
		{"32 bytes", key(t), nil},
		{"32 bytes url-safe", strings.NewReplacer("+", "-", "/", "_").Replace(key(t)), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := secrets.FromEnv(env(tc.val))
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				if tc.val != "" {
					require.NotContains(t, err.Error(), tc.val)
				}
				return
			}
			require.NoError(t, err)
			require.NotNil(t, b)
		})
	}
}

func TestSealOpen(t *testing.T) {
	box, err := secrets.FromEnv(env(key(t)))
	require.NoError(t, err)
	const secret = "rk_test_51abcdefghijklmnopqrstuvWXYZ"
	ad := []byte("tenant_1/conn_1")
	s1, err := box.Seal([]byte(secret), ad)
	require.NoError(t, err)
	s2, err := box.Seal([]byte(secret), ad)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(s1, "v1:"))
	require.NotEqual(t, s1, s2, "fresh nonce each time")
	require.NotContains(t, s1, secret)
	got, err := box.Open(s1, ad)
	require.NoError(t, err)
	require.Equal(t, secret, string(got))

	other, err := secrets.FromEnv(env(key(t)))
	require.NoError(t, err)
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s1, "v1:"))
	raw[len(raw)-1] ^= 1
	tampered := "v1:" + base64.StdEncoding.EncodeToString(raw)
	tests := []struct {
		name   string
		box    *secrets.Box
		sealed string
		ad     string
	}{
		{"wrong key", other, s1, "tenant_1/conn_1"},
		{"wrong associated data", box, s1, "tenant_2/conn_1"},
		{"tampered", box, tampered, "tenant_1/conn_1"},
		{"no prefix", box, strings.TrimPrefix(s1, "v1:"), "tenant_1/conn_1"},
		{"truncated", box, "v1:AAAA", "tenant_1/conn_1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.box.Open(tc.sealed, []byte(tc.ad))
			require.ErrorIs(t, err, secrets.ErrOpen)
		})
	}
}

func TestLast4(t *testing.T) {
	require.Equal(t, "…wxyz", secrets.Last4("rk_test_abcdefwxyz"))
	require.Equal(t, "…", secrets.Last4("short"))
}
