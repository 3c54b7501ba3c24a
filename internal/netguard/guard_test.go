package netguard_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/netguard"
)

// countingServer is a loopback feed that counts the requests reaching it.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"events":[],"next":0}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func addrPortOf(t *testing.T, srv *httptest.Server) netip.AddrPort {
	t.Helper()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	ap, err := netip.ParseAddrPort(u.Host)
	require.NoError(t, err)
	return ap
}

// onlyPort allows exactly one loopback address and port: the test server's.
func onlyPort(ap netip.AddrPort) func(netip.AddrPort) bool {
	return func(x netip.AddrPort) bool { return x == ap }
}

// A name that resolves to a public address at registration and to the
// loopback when the worker dials (DNS rebinding) is refused at dial time,
// and no request reaches the loopback server.
func TestDNSRebindingRefusedAtDial(t *testing.T) {
	srv, hits := countingServer(t, nil)
	port := addrPortOf(t, srv).Port()

	var lookups atomic.Int64
	rebinding := func(_ context.Context, host string) ([]netip.Addr, error) {
		require.Equal(t, "rebind.example", host)
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	g := netguard.New(netguard.Options{Lookup: rebinding})
	feed := fmt.Sprintf("http://rebind.example:%d/events", port)

	_, err := g.CheckURL(context.Background(), feed)
	require.NoError(t, err, "at registration the name is public")

	resp, err := g.Client().Get(feed)
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, netguard.ErrNotAllowed)
	require.Equal(t, "address not allowed", netguard.Classify(err))
	require.Zero(t, hits.Load(), "the request reached the loopback server")
	require.EqualValues(t, 2, lookups.Load())

	// The same name, allowed to the test port, does reach it: the refusal
	// above was the guard's, not a broken setup.
	lookups.Store(1)
	open := netguard.New(netguard.Options{Lookup: rebinding, Allow: onlyPort(addrPortOf(t, srv))})
	resp, err = open.Client().Get(feed)
	require.NoError(t, err)
	resp.Body.Close()
	require.EqualValues(t, 1, hits.Load())
}

// The dialer's Control refuses a refused address however it was reached.
func TestDialerControl(t *testing.T) {
	srv, hits := countingServer(t, nil)
	ap := addrPortOf(t, srv)

	_, err := netguard.New(netguard.Options{}).Dialer().DialContext(context.Background(), "tcp", ap.String())
	require.ErrorIs(t, err, netguard.ErrNotAllowed)

	conn, err := netguard.New(netguard.Options{Allow: onlyPort(ap)}).Dialer().DialContext(context.Background(), "tcp", ap.String())
	require.NoError(t, err)
	conn.Close()

	conn, err = netguard.New(netguard.Options{AllowPrivate: true}).Dialer().DialContext(context.Background(), "tcp", ap.String())
	require.NoError(t, err)
	conn.Close()

	// An IP-literal URL through the guard's client.
	resp, err := netguard.New(netguard.Options{}).Client().Get(srv.URL + "/events")
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, netguard.ErrNotAllowed)
	require.Zero(t, hits.Load())

	_, err = netguard.New(netguard.Options{AllowPrivate: true}).DialContext(context.Background(), "udp", ap.String())
	require.ErrorIs(t, err, netguard.ErrNotAllowed, "only TCP is dialed")
}

func TestRedirects(t *testing.T) {
	// inner is a second loopback server: not allowed, only the feed's port is.
	inner, innerHits := countingServer(t, nil)

	var feedURL string
	feed, feedHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-inner":
			http.Redirect(w, r, inner.URL+"/secret", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-credentials":
			http.Redirect(w, r, "http://admin:s3cret@feed.example/", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, feedURL+"/loop", http.StatusFound)
		case "/to-self":
			http.Redirect(w, r, feedURL+"/events", http.StatusMovedPermanently)
		default:
			_, _ = w.Write([]byte(`{"events":[],"next":0}`))
		}
	})
	feedURL = feed.URL
	g := netguard.New(netguard.Options{Allow: onlyPort(addrPortOf(t, feed)), MaxRedirects: 3, Lookup: stubLookup(names)})

	tests := []struct {
		path      string
		want      string // Classify; "" for success
		feedHits  int64
		innerHits int64
	}{
		{"/events", "", 1, 0},
		{"/to-self", "", 2, 0},
		{"/to-inner", "address not allowed", 1, 0},
		{"/to-metadata", "address not allowed", 1, 0},
		{"/to-credentials", "invalid url", 1, 0},
		{"/to-file", "invalid url", 1, 0},
		{"/loop", "too many redirects", 4, 0}, // the first request and 3 redirects
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			feedHits.Store(0)
			innerHits.Store(0)
			resp, err := g.Client().Get(feed.URL + tt.path)
			if resp != nil {
				resp.Body.Close()
			}
			require.Equal(t, tt.want, netguard.Classify(err), "error: %v", err)
			require.Equal(t, tt.feedHits, feedHits.Load())
			require.Equal(t, tt.innerHits, innerHits.Load())
			if err != nil {
				// net/http quotes a refused redirect's Location verbatim;
				// Redact is what a log line gets.
				require.NotContains(t, netguard.Redact(err), "s3cret")
				require.NotContains(t, netguard.Classify(err), "s3cret")
			}
		})
	}

	// A client on the guard's transport whose CheckRedirect is the default
	// (or was replaced) is still stopped at dial time.
	hc := &http.Client{Transport: g.Transport(), Timeout: 5 * time.Second}
	innerHits.Store(0)
	resp, err := hc.Get(feed.URL + "/to-inner")
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, netguard.ErrNotAllowed)
	require.Zero(t, innerHits.Load())
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// rawServer accepts connections and hands each to serve.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l.Addr().String()
}

type statusErr struct{ code int }

func (e *statusErr) Error() string {
	return "feed answered " + strconv.Itoa(e.code) + " from 10.0.0.7:8080"
}
func (e *statusErr) HTTPStatus() int { return e.code }

func TestClassify(t *testing.T) {
	getWithin := func(u string, timeout time.Duration) error {
		resp, err := netguard.New(netguard.Options{AllowPrivate: true, Timeout: timeout}).Client().Get(u)
		if resp != nil {
			resp.Body.Close()
		}
		return err
	}
	get := func(u string) error { return getWithin(u, 10*time.Second) }

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	plain, _ := countingServer(t, nil)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(tlsSrv.Close)
	garbage := rawServer(t, func(c net.Conn) {
		buf := make([]byte, 1024)
		_, _ = c.Read(buf) // the request, then an answer that is not HTTP
		_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n\r\n"))
	})
	hangup := rawServer(t, func(c net.Conn) {
		buf := make([]byte, 1024)
		_, _ = c.Read(buf)
	})
	refused := closedPort(t)

	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"refused", get("http://" + refused + "/events"), "refused"},
		{"timeout", getWithin(slow.URL+"/events", 300*time.Millisecond), "timeout"},
		{"not http", get("http://" + garbage + "/events"), "bad response"},
		{"hung up", get("http://" + hangup + "/events"), "connection lost"},
		{"https to an http port", get("https://" + plain.Listener.Addr().String() + "/"), "tls failure"},
		{"untrusted certificate", get(tlsSrv.URL + "/"), "tls failure"},
		{"not allowed", fmt.Errorf("pull: %w", &netguard.AddressError{Addr: netip.MustParseAddr("10.0.0.1"), Reason: "private"}), "address not allowed"},
		{"status", fmt.Errorf("pull orders: %w", &statusErr{500}), "http 500"},
		{"status 404", fmt.Errorf("pull orders: %w", &statusErr{404}), "http 404"},
		{"bad body", fmt.Errorf("feed gave a bad response: %w: events[0].id: is required", netguard.ErrBadResponse), "bad response"},
		{"nxdomain", &net.DNSError{Err: "no such host", Name: "x.example", IsNotFound: true}, "no such host"},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", Name: "x.example", IsTimeout: true}, "timeout"},
		{"dns other", &net.DNSError{Err: "server misbehaving", Name: "x.example"}, "dns failure"},
		{"deadline", fmt.Errorf("pull: %w", context.DeadlineExceeded), "timeout"},
		{"canceled", fmt.Errorf("pull: %w", context.Canceled), "canceled"},
		{"other", fmt.Errorf("something at 10.1.2.3:5432 said no"), "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := netguard.Classify(tt.err)
			require.Equal(t, tt.want, got, "error: %v", tt.err)
			require.NotContains(t, got, "127.0.0.1")
			require.NotRegexp(t, `:\d+`, got, "a port leaks into the tenant's text")
		})
	}
}
