package contracts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/contracts"
)

func TestLinksFromIsChecked(t *testing.T) {
	base := `id: c
subject: subscription
settlement: 1m
watch: 1m
sources: [crm, payments, orders]
effects:
  - id: cancelled
    source: crm
    type: subscription_status_changed
forbids:
  - id: no_refund
    source: payments
    type: refund_created
`
	c, err := contracts.Parse([]byte(base + "    through: customer\n    links_from: [orders]\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"orders"}, c.Spec.Forbids[0].LinksFrom)

	_, err = contracts.Parse([]byte(base + "    links_from: [orders]\n"))
	require.ErrorContains(t, err, "links_from only means something with through")
	_, err = contracts.Parse([]byte(base + "    through: customer\n    links_from: [ledger]\n"))
	require.ErrorContains(t, err, `source "ledger" is not in sources`)
	require.True(t, strings.Contains(err.Error(), "forbids[0].links_from[0]"), err.Error())
}
