package stripepay_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/stripefake"
	"github.com/commitlayer/commitlayer/sandbox/stripepay"
)

func TestSelect(t *testing.T) {
	fake := stripefake.Start(stripefake.Options{Keys: []string{secretKey}})
	defer fake.Close()
	withKey := env(map[string]string{stripepay.EnvKey: secretKey, stripepay.EnvBase: fake.URL()})
	tests := []struct {
		name    string
		backend string
		getenv  func(string) string
		want    string
		err     error
	}{
		{"default", "", env(nil), stripepay.NameSandbox, nil},
		{"sandbox", "sandbox", env(nil), stripepay.NameSandbox, nil},
		{"stripe without a key", "stripe", env(nil), "", stripepay.ErrNoKey},
		{"stripe with a live key", "stripe", env(map[string]string{stripepay.EnvKey: "sk_live_abcdefgh"}), "", stripepay.ErrNotTestKey},
		{"stripe", "stripe", withKey, stripepay.NameStripe, nil},
		{"stripe-fake", "stripe-fake", env(nil), stripepay.NameStripeFake, nil},
		{"unknown", "paypal", env(nil), "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := stripepay.Select(tc.backend, tc.getenv, nil)
			if tc.want == "" {
				require.Error(t, err)
				if tc.err != nil {
					require.ErrorIs(t, err, tc.err)
				}
				return
			}
			require.NoError(t, err)
			defer s.Close()
			require.Equal(t, tc.want, s.Name)
			if tc.want == stripepay.NameSandbox {
				require.Nil(t, s.Payments)
				return
			}
			require.NotEmpty(t, s.Notice)
			e, err := sandbox.New(ctx, t.TempDir(), sandbox.Options{Payments: s.Payments})
			require.NoError(t, err)
			defer e.Close()
			res, err := http.Get(e.SystemURL("payments") + "/events")
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			ch, err := http.Get(e.URL() + "/payments/charges/o_1001")
			require.NoError(t, err)
			ch.Body.Close()
			require.Equal(t, http.StatusOK, ch.StatusCode)
		})
	}
	require.NotEmpty(t, fake.Requests(), "the stripe selection used STRIPE_API_BASE")
}
