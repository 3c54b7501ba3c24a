// Package netguard keeps tenant-supplied URLs (connector feeds, webhooks) away
// from internal addresses.
//
// A Guard checks a URL when it is registered (CheckURL) and checks again, on
// every connection, the IP address actually dialed (Client, Transport,
// DialContext), so a name that resolves to a public address at registration
// and to 127.0.0.1 later (DNS rebinding) is still refused, and so is a
// redirect to an internal address. Loopback, private (RFC 1918, fc00::/7),
// link-local, multicast, unspecified, CGNAT (100.64.0.0/10), reserved and
// documentation ranges and the cloud metadata endpoints are refused, in their
// IPv4-mapped and NAT64 / 6to4 IPv6 forms too.
//
// Options.AllowPrivate (COMMITLAYER_ALLOW_PRIVATE_ADDRESSES=1, read by
// FromEnv only) lifts the address checks for demos and sandbox runs; the
// cloud metadata endpoints, URL credentials and non-http schemes stay refused.
//
// Classify turns a failed fetch into a short phrase a tenant may see
// ("timeout", "refused", "http 500", "bad response", "address not allowed", …)
// instead of raw network text; the raw error belongs in the server log.
package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrNotAllowed is wrapped by every refusal of an address, a host or a URL
// because of where it points.
var ErrNotAllowed = errors.New("address not allowed")

// AddressError is a refused address. errors.Is(err, ErrNotAllowed) holds.
// Its text names the host and the address, for the server log; tenants get
// Classify's "address not allowed".
type AddressError struct {
	Host   string     // the host as written, when there was one
	Addr   netip.Addr // the refused address, when there was one
	Reason string     // e.g. "loopback", "private", "cloud metadata"
}

func (e *AddressError) Error() string {
	switch {
	case e.Host != "" && e.Addr.IsValid() && e.Host != e.Addr.String():
		return fmt.Sprintf("address not allowed: %s resolves to %s (%s)", e.Host, e.Addr, e.Reason)
	case e.Addr.IsValid():
		return fmt.Sprintf("address not allowed: %s (%s)", e.Addr, e.Reason)
	default:
		return fmt.Sprintf("address not allowed: host %q (%s)", e.Host, e.Reason)
	}
}

// Is makes errors.Is(err, ErrNotAllowed) hold.
func (e *AddressError) Is(target error) bool { return target == ErrNotAllowed }

type prefixRule struct {
	prefix netip.Prefix
	reason string
}

func rules(reason string, prefixes ...string) []prefixRule {
	out := make([]prefixRule, len(prefixes))
	for i, p := range prefixes {
		out[i] = prefixRule{netip.MustParsePrefix(p), reason}
	}
	return out
}

// metadataAddrs are the cloud metadata endpoints: refused even when private
// addresses are allowed.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack…
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
}

// metadataHosts are metadata endpoints' names, refused before any lookup.
var metadataHosts = map[string]bool{
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"metadata":                   true,
	"instance-data":              true, // AWS's old name for the IMDS
	"instance-data.ec2.internal": true,
}

// blocked lists the refused IPv4 and IPv6 ranges with the reason a log names.
// Mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses
// are judged by the IPv4 address they carry (see embeddedV4).
var blocked = concat(
	rules("unspecified", "0.0.0.0/8", "::/128"),
	rules("loopback", "127.0.0.0/8", "::1/128"),
	rules("private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
	rules("shared address space (CGNAT)", "100.64.0.0/10"),
	rules("link-local", "169.254.0.0/16", "fe80::/10"),
	rules("site-local", "fec0::/10"),
	rules("multicast", "224.0.0.0/4", "ff00::/8"),
	rules("reserved", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4", "::/96", "100::/64", "2001:10::/28"),
	rules("documentation", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20"),
)

func concat(lists ...[]prefixRule) []prefixRule {
	var out []prefixRule
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// embeddedV4 returns the IPv4 address an IPv6 address stands for: the mapped
// form ::ffff:a.b.c.d, a NAT64 address 64:ff9b::a.b.c.d, or a 6to4 address
// 2002:AABB:CCDD::/48.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if a.Is4In6() {
		return a.Unmap(), true
	}
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// Refusal reports why an address would be refused: a reason such as
// "loopback" and metadata true for a cloud metadata endpoint (refused even
// when private addresses are allowed). An empty reason means a public
// address. A zoned address (fe80::1%eth0) is refused as link-local; its zone
// is ignored otherwise.
func Refusal(a netip.Addr) (reason string, metadata bool) {
	if !a.IsValid() {
		return "invalid address", false
	}
	a = a.WithZone("")
	if metadataAddrs[a] {
		return "cloud metadata", true
	}
	if v4, ok := embeddedV4(a); ok {
		if reason, md := Refusal(v4); reason != "" {
			return reason + " (embedded in " + a.String() + ")", md
		}
		if a.Is4In6() {
			return "", false
		}
	}
	for _, r := range blocked {
		if r.prefix.Contains(a) {
			return r.reason, false
		}
	}
	if a == netip.IPv4Unspecified() || a == netip.IPv6Unspecified() {
		return "unspecified", false
	}
	if a.Is4() && a.As4() == [4]byte{255, 255, 255, 255} {
		return "broadcast", false
	}
	return "", false
}

// normalizeHost lower-cases a host name and drops one trailing dot.
func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// numericLooking reports a host that is not a canonical IP literal but that
// some resolvers (inet_aton in libc) read as one: "2130706433", "0x7f.1",
// "0177.0.0.1", "127.1". A DNS name's last label is never all digits, so
// refusing these loses no real host.
func numericLooking(host string) bool {
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	if last != "" && isNumericLabel(last) {
		return true
	}
	for _, l := range labels {
		if !isNumericLabel(l) {
			return false
		}
	}
	return true
}

func isNumericLabel(l string) bool {
	if l == "" {
		return false
	}
	if len(l) > 2 && (l[:2] == "0x" || l[:2] == "0X") {
		l = l[2:]
		for _, c := range l {
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
		return true
	}
	for _, c := range l {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
