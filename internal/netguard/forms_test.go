package netguard_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/netguard"
)

// InternalForm is one line of testdata/internal_hosts.txt.
type internalForm struct {
	Host     string // URL host syntax
	Metadata bool   // refused even with AllowPrivate
}

func readInternalForms(t *testing.T, path string) []internalForm {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []internalForm
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		host, tag, _ := strings.Cut(line, " ")
		out = append(out, internalForm{Host: host, Metadata: tag == "metadata"})
	}
	require.NoError(t, sc.Err())
	return out
}

// bare is a URL host without brackets and with its zone unescaped, as a
// DSN's host or a dial address gives it.
func bare(host string) string {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ReplaceAll(h, "%25", "%")
}

// TestEveryInternalFormRefused: each internal form of the corpus is refused
// as a URL (registration of URLs), as a host (registration of a DSN) and
// at dial time, by the same rules; with private addresses allowed only the
// metadata endpoints stay refused (and the numeric forms no resolver
// agrees on).
func TestEveryInternalFormRefused(t *testing.T) {
	forms := readInternalForms(t, "testdata/internal_hosts.txt")
	require.GreaterOrEqual(t, len(forms), 42)
	closed := netguard.New(netguard.Options{Lookup: stubLookup(names)})
	open := netguard.New(netguard.Options{AllowPrivate: true, Lookup: stubLookup(names)})
	ctx := context.Background()
	for _, f := range forms {
		t.Run(f.Host, func(t *testing.T) {
			_, err := closed.CheckURL(ctx, "http://"+f.Host+"/latest/meta-data/")
			require.ErrorIs(t, err, netguard.ErrNotAllowed, "url")
			require.Equal(t, netguard.AddressNotAllowed, netguard.Classify(err))
			require.ErrorIs(t, closed.CheckHost(ctx, bare(f.Host), 5432), netguard.ErrNotAllowed, "host")
			_, err = closed.DialContext(ctx, "tcp", net.JoinHostPort(bare(f.Host), "5432"))
			require.ErrorIs(t, err, netguard.ErrNotAllowed, "dial")
			if f.Metadata {
				_, err := open.CheckURL(ctx, "http://"+f.Host+"/")
				require.ErrorIs(t, err, netguard.ErrNotAllowed, "metadata stays refused with private addresses allowed")
				require.ErrorIs(t, open.CheckHost(ctx, bare(f.Host), 80), netguard.ErrNotAllowed)
			}
		})
	}
	for _, sock := range []string{"/var/run/postgresql", "/tmp", "@abstract"} {
		require.ErrorIs(t, closed.CheckHost(ctx, sock, 5432), netguard.ErrNotAllowed, sock)
		require.ErrorIs(t, open.CheckHost(ctx, sock, 5432), netguard.ErrNotAllowed, "a unix socket is refused even when private addresses are allowed")
	}
	require.NoError(t, closed.CheckHost(ctx, "feed.example", 5432))
	require.NoError(t, open.CheckHost(ctx, "127.0.0.1", 5432), "the sandbox's loopback stays allowed")
	require.NoError(t, open.CheckHost(ctx, "localhost", 5432))
}
