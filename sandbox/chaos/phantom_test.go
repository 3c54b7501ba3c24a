package chaos_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
)

// A phantom answer has the same fields as the real one, for every write
// route the agent's tools call, and writes nothing.
func TestPhantomBodiesMatchRealResponses(t *testing.T) {
	ctx := context.Background()
	writes := []struct{ path, body string }{
		{"/payments/refunds", `{"order_id":"o_1001","amount":2500,"currency":"USD","reason":"r"}`},
		{"/payments/billing/stop", `{"subscription_id":"sub_1"}`},
		{"/orders/orders/o_1003/status", `{"status":"paid"}`},
		{"/orders/orders/o_1003/address", `{"address":"7 Harbor Road"}`},
		{"/orders/orders/o_1003/discounts", `{"percent":10}`},
		{"/crm/subscriptions/sub_1/cancel", `{"reason":"asked"}`},
		{"/tickets/tickets/t_1/notes", `{"body":"hello"}`},
		{"/tickets/tickets/t_1/close", `{"resolution":"done"}`},
		{"/ledger/payouts", `{"account_id":"acc_1","amount":100,"currency":"USD"}`},
		{"/platform/services/svc_api/deploy", `{"version":"1.5.0","environment":"production"}`},
		{"/broker/orders", `{"product_id":"p_acme","account_id":"acc_1","side":"buy","quantity":2,"limit_price":15500}`},
	}
	realE, err := sandbox.New(ctx, t.TempDir(), sandbox.Options{})
	require.NoError(t, err)
	defer realE.Close()
	fakeE, err := sandbox.New(ctx, t.TempDir(), sandbox.Options{})
	require.NoError(t, err)
	defer fakeE.Close()
	tr := chaos.New(nil, fakeE.URL())
	for _, sys := range sandbox.Systems {
		require.NoError(t, tr.Arm(ctx, chaos.Rule{Name: "phantom " + sys, System: sys, Mode: chaos.PhantomSuccess}))
	}
	keys := func(c *http.Client, base, path, body string) []string {
		t.Helper()
		resp, err := c.Post(base+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, "%s: %s", path, b)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	headBefore := eventCount(t, fakeE)
	for _, w := range writes {
		t.Run(w.path, func(t *testing.T) {
			real := keys(http.DefaultClient, realE.URL(), w.path, w.body)
			fake := keys(&http.Client{Transport: tr}, fakeE.URL(), w.path, w.body)
			require.Equal(t, real, fake)
		})
	}
	require.Equal(t, headBefore, eventCount(t, fakeE), "phantoms write nothing")
}

func eventCount(t *testing.T, e *sandbox.Enterprise) int {
	t.Helper()
	n := 0
	for _, s := range sandbox.Systems {
		resp, err := http.Get(e.URL() + "/" + s + "/events?after=0&limit=5000")
		require.NoError(t, err)
		var page struct {
			Events []json.RawMessage `json:"events"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
		resp.Body.Close()
		n += len(page.Events)
	}
	return n
}
