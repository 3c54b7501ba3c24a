package harness

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/connectors/pull"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

func TestQueryConnectorsSetting(t *testing.T) {
	q, err := ParseQueryConnectors("")
	require.NoError(t, err)
	require.Empty(t, q)
	q, err = ParseQueryConnectors(" payments, orders ,,tickets")
	require.NoError(t, err)
	require.Equal(t, []string{"payments", "orders", "tickets"}, q)
	_, err = ParseQueryConnectors("payments,warehouse")
	require.ErrorContains(t, err, `"warehouse" is not a sandbox system`)

	c, err := connectorFor("http://127.0.0.1:8080", "payments", q)
	require.NoError(t, err)
	require.Equal(t, "http_json", c.Kind)
	// The service opens it as any tenant's http_json connector.
	_, err = pull.OpenConnector("", c, pull.Options{})
	require.NoError(t, err)
	c, err = connectorFor("http://127.0.0.1:8080", "ledger", q)
	require.NoError(t, err)
	require.Equal(t, "http_events", c.Kind)
	require.Equal(t, "http://127.0.0.1:8080/ledger", c.URL)
}

// TestQueryConnectorReadsWhatTheFeedReads: through the product's
// connectors, the http_json query connector (QueryConfig) reads every
// sandbox system into the same facts, links and cursors as the
// http_events feed connector, and continues from its cursor.
func TestQueryConnectorReadsWhatTheFeedReads(t *testing.T) {
	ctx := context.Background()
	e, err := sandbox.New(ctx, t.TempDir(), sandbox.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	opts := pull.Options{HTTP: &http.Client{Timeout: 10 * time.Second}}
	read := func(p pull.Puller, sys, cursor string) ([]commitlayer.Fact, string) {
		var facts []commitlayer.Fact
		for {
			page, err := p.Pull(ctx, sys, cursor)
			require.NoError(t, err, sys)
			facts, cursor = append(facts, page.Facts...), page.Next
			if !page.More {
				return facts, cursor
			}
		}
	}
	total := 0
	for _, sys := range systems.Names {
		feed, err := pull.OpenConnector("", commitlayer.Connector{Kind: pull.KindHTTPEvents, URL: e.URL() + "/" + sys}, opts)
		require.NoError(t, err)
		c, err := connectorFor(e.URL(), sys, []string{sys})
		require.NoError(t, err)
		query, err := pull.OpenConnector("", c, opts)
		require.NoError(t, err)
		a, fromFeed := read(feed, sys, "")
		b, fromQuery := read(query, sys, "")
		require.Equal(t, a, b, sys)
		require.Equal(t, fromFeed, fromQuery, sys)
		again, _ := read(query, sys, fromQuery)
		require.Empty(t, again, "%s: nothing read twice", sys)
		total += len(b)
	}
	require.Positive(t, total, "the seeded enterprise has records")
}
