package stripe_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	stripeconn "github.com/commitlayer/commitlayer/connectors/stripe"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/sandbox/stripefake/wirecheck"
)

// TestWireShapesAcceptedByStripeMock pulls through every cursor state
// (start, mid-sweep, watermark, watermark mid-sweep) against the fake, then
// sends each distinct request shape to stripe-mock; and pulls stripe-mock
// itself, so stripe-go decodes the spec's example objects into facts.
func TestWireShapesAcceptedByStripeMock(t *testing.T) {
	mock := testenv.StripeMock(t)
	a := newAccount(t)
	for i := range 3 {
		pi := a.pi(t, 1000, "o_"+string(rune('a'+i)))
		a.refund(t, pi, 100)
		_, err := a.f.AddDispute(pi, "fraudulent")
		require.NoError(t, err)
		a.f.AddPayout(100, "usd", "paid")
		a.tick(time.Second)
	}
	n := len(a.f.Requests())
	cur := ""
	for range 2 { // first sweep, then a sweep from the watermark
		for {
			p, err := a.client().Pull(ctx, "stripe", cur, 2)
			require.NoError(t, err)
			cur = p.Next
			if !p.More {
				break
			}
		}
		for i := range 3 {
			pi := a.pi(t, 1000, "o_n"+string(rune('a'+i)))
			a.refund(t, pi, 100)
			_, err := a.f.AddDispute(pi, "fraudulent")
			require.NoError(t, err)
			a.f.AddPayout(100, "usd", "paid")
		}
	}
	shapes, err := wirecheck.Shapes(t.Context(), a.f.Requests()[n:], mock)
	require.NoError(t, err)
	t.Logf("stripe-mock accepted:\n%v", shapes)
	for _, res := range stripeconn.Resources {
		for _, params := range []string{"limit", "limit&starting_after", "created[gte]&limit", "created[gte]&limit&starting_after"} {
			require.Contains(t, shapes, "GET /v1/"+res+" "+params)
		}
	}

	c := &stripeconn.Client{BaseURL: mock, Key: "rk_test_stripemock0000"}
	p, err := c.Pull(ctx, "stripe", "", 0)
	require.NoError(t, err)
	require.NotEmpty(t, p.Facts)
	for _, f := range p.Facts {
		require.NoError(t, f.Validate())
	}
}
