package netguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvAllowPrivate is the environment variable FromEnv reads: "1" (or "true")
// allows private, loopback and link-local addresses.
const EnvAllowPrivate = "COMMITLAYER_ALLOW_PRIVATE_ADDRESSES"

// Defaults.
const (
	DefaultMaxRedirects = 5
	DefaultTimeout      = 30 * time.Second
	DefaultDialTimeout  = 10 * time.Second
)

// ErrTooManyRedirects is returned when a fetch is redirected more than
// Options.MaxRedirects times.
var ErrTooManyRedirects = errors.New("too many redirects")

// LookupFunc resolves a host name to its addresses (net.Resolver.LookupNetIP
// with network "ip" is the default). Tests inject one to play DNS rebinding.
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// Options configure a Guard. The zero value refuses every non-public address.
type Options struct {
	// AllowPrivate allows loopback, private, link-local, CGNAT and the other
	// non-public ranges (the demo and the sandbox serve their feeds on the
	// loopback). Cloud metadata endpoints stay refused.
	AllowPrivate bool
	// Allow, when set, lets through an otherwise refused address and port
	// (not a metadata endpoint): an allowlist, or one test server's port.
	Allow func(netip.AddrPort) bool
	// Lookup resolves names; nil means net.DefaultResolver.
	Lookup LookupFunc
	// MaxRedirects caps the redirects a Client follows; 0 means
	// DefaultMaxRedirects, negative means none are followed.
	MaxRedirects int
	// Timeout is the Client's overall timeout; 0 means DefaultTimeout.
	Timeout time.Duration
}

// FromEnv returns Options with AllowPrivate read with getenv from
// COMMITLAYER_ALLOW_PRIVATE_ADDRESSES ("1"/"true" allow, ""/"0"/"false"
// refuse). Any other value is an error naming the variable, so a typo does
// not silently open or close the door.
func FromEnv(getenv func(string) string) (Options, error) {
	v := strings.TrimSpace(getenv(EnvAllowPrivate))
	if v == "" {
		return Options{}, nil
	}
	allow, err := strconv.ParseBool(v)
	if err != nil {
		return Options{}, fmt.Errorf("%s: %q is not 1, 0, true or false", EnvAllowPrivate, v)
	}
	return Options{AllowPrivate: allow}, nil
}

// Guard checks URLs and the addresses they lead to. It is safe for
// concurrent use.
type Guard struct {
	opts      Options
	dialer    *net.Dialer
	transport *http.Transport
}

// New returns a Guard with the options. Make one per process (or per
// policy): its Transport and Clients share one connection pool.
func New(opts Options) *Guard {
	g := &Guard{opts: opts}
	g.dialer = &net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second, Control: g.control}
	g.transport = &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 20 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return g
}

// AllowsPrivate reports whether private addresses are allowed.
func (g *Guard) AllowsPrivate() bool { return g.opts.AllowPrivate }

// CheckAddr returns an *AddressError when the guard refuses to connect to
// the address and port.
func (g *Guard) CheckAddr(ap netip.AddrPort) error {
	return g.checkAddr("", ap)
}

func (g *Guard) checkAddr(host string, ap netip.AddrPort) error {
	reason, metadata := Refusal(ap.Addr())
	switch {
	case reason == "":
		return nil
	case metadata:
		// Never: not with AllowPrivate, not through Allow.
	case g.opts.AllowPrivate && reason != "invalid address":
		return nil
	case g.opts.Allow != nil && g.opts.Allow(netip.AddrPortFrom(ap.Addr().WithZone("").Unmap(), ap.Port())):
		return nil
	}
	return &AddressError{Host: host, Addr: ap.Addr(), Reason: reason}
}

// URLError is a URL refused for its form (scheme, credentials, host
// syntax), not for where it points. Its text quotes no credentials.
type URLError struct{ Reason string }

func (e *URLError) Error() string { return "url: " + e.Reason }

// CheckURL parses a URL a tenant registers and checks it: http or https, an
// absolute URL with a host, no user:password@, no numeric host forms other
// than canonical IP literals, and a host whose every address the guard
// allows (names are resolved now; the dialer checks again at each
// connection). Refused addresses wrap ErrNotAllowed; a host that does not
// resolve gives the lookup's *net.DNSError.
func (g *Guard) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := g.checkURLForm(raw)
	if err != nil {
		return nil, err
	}
	if _, err := g.resolve(ctx, u.Hostname(), portOf(u)); err != nil {
		return nil, err
	}
	return u, nil
}

// CheckHost checks a host and port a tenant registers outside a URL (a
// database DSN's host): the same rules as a URL's host, and the same
// resolution the dialer does at each connection (DialContext). A Unix
// socket path ("/var/run/postgresql", "@abstract") is refused: it reaches
// the server's own machine, never a tenant's system.
func (g *Guard) CheckHost(ctx context.Context, host string, port uint16) error {
	switch {
	case host == "":
		return &URLError{"a host is required"}
	case strings.HasPrefix(host, "/"), strings.HasPrefix(host, "@"):
		return &AddressError{Host: host, Reason: "unix socket"}
	case strings.ContainsAny(host, " \t\r\n\x00\\/"):
		return &URLError{"host contains spaces, control characters or slashes"}
	case strings.Contains(host, "%"):
		return &AddressError{Host: host, Reason: "zoned IPv6 address"}
	}
	_, err := g.resolve(ctx, strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), port)
	return err
}

func (g *Guard) checkURLForm(raw string) (*url.URL, error) {
	if strings.ContainsAny(raw, " \t\r\n\x00\\") {
		return nil, &URLError{"contains spaces, control characters or backslashes"}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &URLError{"not a URL"} // url.Error quotes the URL, credentials and all
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, &URLError{"scheme must be http or https"}
	case u.Opaque != "" || u.Host == "":
		return nil, &URLError{"must be an absolute URL with a host"}
	case u.User != nil:
		return nil, &URLError{"must not carry credentials (user:password@); give them another way"}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, &URLError{fmt.Sprintf("port %q is not 1-65535", p)}
		}
	}
	host := u.Hostname()
	if strings.Contains(host, "%") {
		return nil, &AddressError{Host: host, Reason: "zoned IPv6 address"}
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return u, nil
	}
	h := normalizeHost(host)
	switch {
	case h == "":
		return nil, &URLError{"must be an absolute URL with a host"}
	case numericLooking(h):
		return nil, &AddressError{Host: host, Reason: "numeric host that is not a dotted-decimal IPv4 or an IPv6 literal"}
	case metadataHosts[h]:
		return nil, &AddressError{Host: host, Reason: "cloud metadata"}
	}
	return u, nil
}

func portOf(u *url.URL) uint16 {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return uint16(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// resolve returns the addresses of host (a name or an IP literal), refusing
// when any of them is refused: a name that also points inside is not
// trusted with its public addresses either.
func (g *Guard) resolve(ctx context.Context, host string, port uint16) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if err := g.checkAddr("", netip.AddrPortFrom(a, port)); err != nil {
			return nil, err
		}
		return []netip.Addr{a}, nil
	}
	h := normalizeHost(host)
	if h == "" || numericLooking(h) || metadataHosts[h] {
		reason := "cloud metadata"
		if !metadataHosts[h] {
			reason = "numeric host that is not a dotted-decimal IPv4 or an IPv6 literal"
		}
		return nil, &AddressError{Host: host, Reason: reason}
	}
	lookup := g.opts.Lookup
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := lookup(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: %w", host, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true})
	}
	for _, a := range addrs {
		if err := g.checkAddr(host, netip.AddrPortFrom(a, port)); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// DialContext resolves the address with the guard's lookup, refuses it when
// any resolved address is refused, and dials the addresses in turn; the
// dialer's Control checks once more the address the socket connects to.
// Use it as http.Transport.DialContext.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("dial %s %s: %w", network, address, &AddressError{Host: address, Reason: "network " + network})
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: port %q: %w", address, portStr, err)
	}
	addrs, err := g.resolve(ctx, host, uint16(port))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	var first error
	for _, a := range addrs {
		conn, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// control runs before each connect: the socket's address, whatever resolved
// it, must be allowed.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &AddressError{Host: address, Reason: "unparsable dial address"}
	}
	return g.checkAddr("", ap)
}

// Dialer returns a net.Dialer whose Control refuses the addresses the guard
// refuses, for clients that dial themselves (it does no name checks; prefer
// DialContext).
func (g *Guard) Dialer() *net.Dialer {
	d := *g.dialer
	return &d
}

// Transport returns the guard's http.Transport (one per Guard): it dials
// through DialContext and ignores proxy settings (a proxy would dial for us,
// unchecked). Wrap it, don't copy it.
func (g *Guard) Transport() *http.Transport { return g.transport }

// Client returns an http.Client on the guard's Transport whose redirects are re-checked
// (scheme, credentials, host) and capped at Options.MaxRedirects, with
// Options.Timeout.
func (g *Guard) Client() *http.Client {
	timeout := g.opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{Transport: g.Transport(), Timeout: timeout, CheckRedirect: g.CheckRedirect}
}

// CheckRedirect is an http.Client.CheckRedirect that re-checks each redirect
// target like CheckURL (resolving it) and stops after MaxRedirects. Use it
// on a client whose transport is not the guard's too.
func (g *Guard) CheckRedirect(req *http.Request, via []*http.Request) error {
	max := g.opts.MaxRedirects
	if max == 0 {
		max = DefaultMaxRedirects
	}
	if len(via) > max || max < 0 {
		return fmt.Errorf("after %d redirects: %w", len(via), ErrTooManyRedirects)
	}
	if _, err := g.CheckURL(req.Context(), req.URL.String()); err != nil {
		return fmt.Errorf("redirect: %w", err)
	}
	return nil
}
