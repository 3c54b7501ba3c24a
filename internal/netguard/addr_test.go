package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/netguard"
)

func TestRefusal(t *testing.T) {
	tests := []struct {
		addr     string
		refused  bool
		metadata bool
	}{
		// public
		{"93.184.216.34", false, false},
		{"8.8.8.8", false, false},
		{"172.32.0.1", false, false},
		{"100.128.0.1", false, false},
		{"100.63.255.255", false, false},
		{"2606:4700:4700::1111", false, false},
		{"::ffff:93.184.216.34", false, false},
		{"64:ff9b::808:808", false, false}, // NAT64 of 8.8.8.8
		{"2002:808:808::1", false, false},  // 6to4 of 8.8.8.8
		// loopback and unspecified
		{"127.0.0.1", true, false},
		{"127.255.255.254", true, false},
		{"::1", true, false},
		{"0.0.0.0", true, false},
		{"0.1.2.3", true, false},
		{"::", true, false},
		// private, CGNAT
		{"10.0.0.1", true, false},
		{"172.16.0.1", true, false},
		{"172.31.255.255", true, false},
		{"192.168.1.1", true, false},
		{"100.64.0.1", true, false},
		{"100.127.255.255", true, false},
		{"fc00::1", true, false},
		{"fd12:3456::1", true, false},
		// link-local, multicast, broadcast, reserved, documentation
		{"169.254.1.1", true, false},
		{"fe80::1", true, false},
		{"fe80::1%eth0", true, false},
		{"224.0.0.1", true, false},
		{"239.255.255.250", true, false},
		{"ff02::1", true, false},
		{"255.255.255.255", true, false},
		{"240.0.0.1", true, false},
		{"198.18.0.1", true, false},
		{"192.0.2.1", true, false},
		{"2001:db8::1", true, false},
		{"::7f00:1", true, false}, // IPv4-compatible ::127.0.0.1
		// cloud metadata
		{"169.254.169.254", true, true},
		{"169.254.170.2", true, true},
		{"fd00:ec2::254", true, true},
		{"::ffff:169.254.169.254", true, true},
		// IPv6 forms of refused IPv4 addresses
		{"::ffff:127.0.0.1", true, false},
		{"::ffff:10.0.0.1", true, false},
		{"64:ff9b::7f00:1", true, false},   // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", true, true}, // NAT64 of 169.254.169.254
		{"2002:7f00:1::", true, false},     // 6to4 of 127.0.0.1
		{"2002:a00:1::", true, false},      // 6to4 of 10.0.0.1
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			reason, md := netguard.Refusal(netip.MustParseAddr(tt.addr))
			require.Equal(t, tt.refused, reason != "", "reason %q", reason)
			require.Equal(t, tt.metadata, md)
		})
	}
}

// stubLookup answers from a table and fails every other name, so no test
// asks real DNS.
func stubLookup(table map[string][]string) netguard.LookupFunc {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		ss, ok := table[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		out := make([]netip.Addr, len(ss))
		for i, s := range ss {
			out[i] = netip.MustParseAddr(s)
		}
		return out, nil
	}
}

var names = map[string][]string{
	"feed.example":     {"93.184.216.34"},
	"v6.example":       {"2606:4700::6810:84e5"},
	"internal.example": {"10.0.0.5"},
	"mixed.example":    {"93.184.216.34", "127.0.0.1"},
	"mapped.example":   {"::ffff:127.0.0.1"},
	"localhost":        {"127.0.0.1", "::1"},
}

func TestCheckURL(t *testing.T) {
	const (
		ok         = ""
		notAllowed = "address not allowed"
		invalid    = "invalid url"
		nxdomain   = "no such host"
	)
	tests := []struct {
		url          string
		want         string // Classify of the error; "" when accepted
		wantWhenOpen string // with AllowPrivate
	}{
		{"https://feed.example/events", ok, ok},
		{"http://feed.example:8080/a?b=c", ok, ok},
		{"https://FEED.example./x", ok, ok},
		{"https://v6.example/", ok, ok},
		{"http://93.184.216.34/", ok, ok},
		{"http://[2606:4700::1]:8443/", ok, ok},
		{"http://[::ffff:93.184.216.34]/", ok, ok},
		// refused by address, allowed when private addresses are
		{"http://127.0.0.1:8080/", notAllowed, ok},
		{"http://localhost/", notAllowed, ok},
		{"http://LOCALHOST./", notAllowed, ok},
		{"http://[::1]/", notAllowed, ok},
		{"http://[::ffff:127.0.0.1]/", notAllowed, ok},
		{"http://[::ffff:7f00:1]/", notAllowed, ok},
		{"http://[0:0:0:0:0:ffff:10.0.0.1]/", notAllowed, ok},
		{"http://10.1.2.3/", notAllowed, ok},
		{"http://172.16.5.4/", notAllowed, ok},
		{"http://192.168.0.10/", notAllowed, ok},
		{"http://100.64.1.1/", notAllowed, ok},
		{"http://169.254.10.10/", notAllowed, ok},
		{"http://[fe80::1]/", notAllowed, ok},
		{"http://[fd12::1]/", notAllowed, ok},
		{"http://224.0.0.251/", notAllowed, ok},
		{"http://[ff02::1]/", notAllowed, ok},
		{"http://0.0.0.0/", notAllowed, ok},
		{"http://[::]/", notAllowed, ok},
		{"http://[64:ff9b::7f00:1]/", notAllowed, ok},
		{"http://internal.example/", notAllowed, ok},
		{"http://mixed.example/", notAllowed, ok},
		{"http://mapped.example/", notAllowed, ok},
		// cloud metadata: refused even when private addresses are allowed
		{"http://169.254.169.254/latest/meta-data/", notAllowed, notAllowed},
		{"http://[fd00:ec2::254]/", notAllowed, notAllowed},
		{"http://[::ffff:169.254.169.254]/", notAllowed, notAllowed},
		{"http://metadata.google.internal/computeMetadata/v1/", notAllowed, notAllowed},
		{"http://Metadata.Google.Internal./", notAllowed, notAllowed},
		// numeric forms net.ParseIP rejects but inet_aton accepts
		{"http://2130706433/", notAllowed, notAllowed},
		{"http://0x7f000001/", notAllowed, notAllowed},
		{"http://0177.0.0.1/", notAllowed, notAllowed},
		{"http://0x7f.0.0.1/", notAllowed, notAllowed},
		{"http://127.1/", notAllowed, notAllowed},
		{"http://017700000001/", notAllowed, notAllowed},
		{"http://10.0.1/", notAllowed, notAllowed},
		{"http://1.2.3.04/", notAllowed, notAllowed},
		{"http://feed.123/", notAllowed, notAllowed},
		{"http://[fe80::1%25eth0]/", notAllowed, notAllowed},
		// form
		{"http://user:s3cret@feed.example/", invalid, invalid},
		{"http://user@feed.example/", invalid, invalid},
		{"http://:pw@feed.example/", invalid, invalid},
		{"ftp://feed.example/", invalid, invalid},
		{"file:///etc/passwd", invalid, invalid},
		{"gopher://feed.example/", invalid, invalid},
		{"javascript:alert(1)", invalid, invalid},
		{"//feed.example/events", invalid, invalid},
		{"http:///events", invalid, invalid},
		{"http:feed.example", invalid, invalid},
		{"http://feed.example:99999/", invalid, invalid},
		{"http://feed.example:0/", invalid, invalid},
		{"http://feed.example/a b", invalid, invalid},
		{"http://feed.example\\@127.0.0.1/", invalid, invalid},
		{"http://%zz/", invalid, invalid},
		{"", invalid, invalid},
		// unresolvable
		{"http://nx.example/", nxdomain, nxdomain},
	}
	for _, open := range []bool{false, true} {
		g := netguard.New(netguard.Options{AllowPrivate: open, Lookup: stubLookup(names)})
		for _, tt := range tests {
			want := tt.want
			if open {
				want = tt.wantWhenOpen
			}
			name := tt.url
			if open {
				name = "open/" + name
			}
			t.Run(name, func(t *testing.T) {
				u, err := g.CheckURL(context.Background(), tt.url)
				require.Equal(t, want, netguard.Classify(err), "error: %v", err)
				if want == ok {
					require.NotNil(t, u)
					return
				}
				require.Nil(t, u)
				require.NotContains(t, err.Error(), "s3cret", "an error quotes the URL's password")
				if want == notAllowed {
					require.ErrorIs(t, err, netguard.ErrNotAllowed)
				}
			})
		}
	}
}

func TestCheckAddrAllowHook(t *testing.T) {
	only := netip.MustParseAddrPort("127.0.0.1:4567")
	g := netguard.New(netguard.Options{Allow: func(ap netip.AddrPort) bool { return ap == only }})
	require.NoError(t, g.CheckAddr(only))
	require.NoError(t, g.CheckAddr(netip.MustParseAddrPort("[::ffff:127.0.0.1]:4567")), "the hook sees the unmapped address")
	require.ErrorIs(t, g.CheckAddr(netip.MustParseAddrPort("127.0.0.1:4568")), netguard.ErrNotAllowed)
	require.ErrorIs(t, g.CheckAddr(netip.MustParseAddrPort("10.0.0.1:4567")), netguard.ErrNotAllowed)

	all := netguard.New(netguard.Options{Allow: func(netip.AddrPort) bool { return true }})
	require.ErrorIs(t, all.CheckAddr(netip.MustParseAddrPort("169.254.169.254:80")), netguard.ErrNotAllowed,
		"no hook opens the metadata endpoint")
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		val     string
		allow   bool
		wantErr bool
	}{
		{"", false, false},
		{"0", false, false},
		{"false", false, false},
		{"1", true, false},
		{"true", true, false},
		{" 1 ", true, false},
		{"yes", false, true},
		{"2", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.val, func(t *testing.T) {
			t.Setenv(netguard.EnvAllowPrivate, tt.val)
			o, err := netguard.FromEnv(os.Getenv)
			if tt.wantErr {
				require.Error(t, err)
				require.Contains(t, err.Error(), netguard.EnvAllowPrivate)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.allow, o.AllowPrivate)
		})
	}
}

func TestAddressErrorText(t *testing.T) {
	g := netguard.New(netguard.Options{Lookup: stubLookup(names)})
	_, err := g.CheckURL(context.Background(), "http://internal.example/")
	var ae *netguard.AddressError
	require.True(t, errors.As(err, &ae))
	require.Equal(t, "private", ae.Reason)
	// The server log learns what the name resolved to; Classify hides it.
	require.True(t, strings.Contains(err.Error(), "10.0.0.5"), err.Error())
	require.Equal(t, "address not allowed", netguard.Classify(err))
}
