package httpevents

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/netguard"
)

// What a tenant sees of a failed pull is netguard.Classify's phrase, never
// the feed's address or words.
func TestPullErrorsClassify(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down/events":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"db_down","message":"pg at 10.0.0.9:5432 refused"}}`))
		case "/garbled/events":
			_, _ = w.Write([]byte(`{"events":[{"id":""}],"next":1}`))
		default:
			_, _ = w.Write([]byte(`{"events":[],"next":0}`))
		}
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	ap := netip.MustParseAddrPort(u.Host)
	allowed := netguard.New(netguard.Options{Allow: func(x netip.AddrPort) bool { return x == ap }}).Client()
	strict := netguard.New(netguard.Options{}).Client()

	tests := []struct {
		name string
		hc   *http.Client
		path string
		want string
	}{
		{"ok", allowed, "/ok", ""},
		{"status", allowed, "/down", "http 503"},
		{"bad page", allowed, "/garbled", "bad response"},
		{"loopback refused", strict, "/ok", "address not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{HTTP: tt.hc, BaseURL: srv.URL + tt.path}
			_, err := c.Pull(context.Background(), "shop", 0, 10)
			require.Equal(t, tt.want, netguard.Classify(err), "error: %v", err)
			if tt.want == "bad response" {
				require.ErrorIs(t, err, ErrBadResponse)
			}
		})
	}
}
