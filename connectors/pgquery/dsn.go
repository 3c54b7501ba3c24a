package pgquery

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer"
)

// HostPort is one server a DSN connects to.
type HostPort struct {
	Host string
	Port uint16
}

// kvKey finds the keys of a key=value DSN.
var kvKey = regexp.MustCompile(`(?:^|\s)([A-Za-z_]+)\s*=`)

// refusedKeys make the connection read the server's own files or
// environment for a tenant's connector: its password file, its service
// definitions.
var refusedKeys = map[string]bool{"passfile": true, "service": true, "servicefile": true}

// Hosts returns every server a DSN connects to (its host and fallbacks,
// and its hostaddr: libpq dials hostaddr's numeric addresses and keeps host
// for the server's name only), for the address rules to check at
// registration as the dialer checks at each connection. The DSN must name
// its host: the defaults would reach the server's own machine. A Unix
// socket is refused, and so are refusedKeys. Errors are
// *commitlayer.FieldError on "dsn", and quote no part of it.
func Hosts(dsn string) ([]HostPort, error) {
	bad := func(reason string) error { return &commitlayer.FieldError{Field: "dsn", Reason: reason} }
	keys, explicitHost, err := dsnKeys(dsn)
	if err != nil {
		return nil, bad(err.Error())
	}
	for _, k := range keys {
		if refusedKeys[strings.ToLower(k)] {
			return nil, bad(fmt.Sprintf("%s is not allowed: a connector may not read the server's files", k))
		}
	}
	if !explicitHost {
		return nil, bad("must name its host (postgres://role@host:5432/db): the defaults would reach the server's own machine")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, bad("is not a PostgreSQL connection string")
	}
	out := []HostPort{{cfg.Host, cfg.Port}}
	for _, fb := range cfg.Fallbacks {
		out = append(out, HostPort{fb.Host, fb.Port})
	}
	for _, hp := range out {
		if hp.Host == "" || strings.HasPrefix(hp.Host, "/") || strings.HasPrefix(hp.Host, "@") {
			return nil, ErrUnixSocket
		}
	}
	// pgx does not know hostaddr (it would send it to the server as a
	// setting); libpq connects to it, so it is checked as libpq reads it:
	// numeric addresses, one per host, an empty one leaving that host's.
	if addrs, ok := cfg.RuntimeParams["hostaddr"]; ok {
		for i, a := range strings.Split(addrs, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			if _, err := netip.ParseAddr(a); err != nil {
				return nil, bad("hostaddr must be IP addresses (a name goes in host)")
			}
			out = append(out, HostPort{a, out[min(i, len(out)-1)].Port})
		}
	}
	return out, nil
}

// ErrUnixSocket: a DSN that connects through a Unix socket, which reaches
// the server's own machine.
var ErrUnixSocket = errors.New("dsn: connects through a Unix socket (host=/path)")

// dsnKeys returns the keys a DSN sets and whether it names a host itself.
func dsnKeys(dsn string) ([]string, bool, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, false, errors.New("is not a PostgreSQL connection string")
		}
		q := u.Query()
		return slices.Collect(maps.Keys(q)), u.Hostname() != "" || q.Get("host") != "", nil
	}
	var keys []string
	host := false
	for _, m := range kvKey.FindAllStringSubmatch(dsn, -1) {
		keys = append(keys, m[1])
		if strings.EqualFold(m[1], "host") || strings.EqualFold(m[1], "hostaddr") {
			host = true
		}
	}
	return keys, host, nil
}
