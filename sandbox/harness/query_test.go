package harness

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/connectors/pull"
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
	_, err = pull.Open(c.Kind, c.URL, c.Config, pull.Options{})
	require.NoError(t, err)
	c, err = connectorFor("http://127.0.0.1:8080", "ledger", q)
	require.NoError(t, err)
	require.Equal(t, "http_events", c.Kind)
	require.Equal(t, "http://127.0.0.1:8080/ledger", c.URL)
}
