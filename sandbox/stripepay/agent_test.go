package stripepay_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
)

// TestScriptedAgentOverStripe runs the scripted agent's refund through the
// chaos transport against a Stripe-backed enterprise: a lost response
// retried without a key refunds twice when the first refund was partial,
// and is refused by Stripe (400 charge_already_refunded) when it was full;
// with a key, Stripe replays.
func TestScriptedAgentOverStripe(t *testing.T) {
	tests := []struct {
		name        string
		order       string
		amount      int64
		profile     agent.Profile
		refunds     int
		claim       string
		refusedCode string
	}{
		{"partial, retried without a key: a duplicate", "o_1006", 1000, agent.Profile{RetryWithoutKey: true}, 2, commitlayer.ClaimSuccess, ""},
		{"full, retried without a key: Stripe refuses the second", "o_1001", 12000, agent.Profile{RetryWithoutKey: true}, 1, commitlayer.ClaimFailure, "charge_already_refunded"},
		{"full, retried with a key: replayed", "o_1001", 12000, agent.Profile{RetryWithKey: true}, 1, commitlayer.ClaimSuccess, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			tr := chaos.New(nil, r.e.URL())
			require.NoError(t, tr.Arm(ctx, chaos.Rule{System: "payments", Route: "POST /payments/refunds", Call: 1, Mode: chaos.LostResponse}))
			a := agent.NewScripted(r.e.URL(), &http.Client{Transport: tr, Timeout: 10 * time.Second}, r.e.Clock(), tc.profile)
			res, err := a.Run(ctx, agent.Task{Process: "refund", Subject: commitlayer.Subject("order:" + tc.order), AgentID: "agent_1",
				Params: commitlayer.Attrs{"amount": tc.amount, "currency": "USD"}})
			require.NoError(t, err)
			require.Equal(t, tc.claim, res.Action.Claim.Status, res.Action.Claim.Message)
			require.Len(t, r.fake.Refunds(), tc.refunds)
			if tc.refusedCode != "" {
				require.Contains(t, res.Action.Claim.Message, tc.refusedCode)
			}
			n := 0
			for _, ev := range r.events(t) {
				if ev.Type == "refund_created" && ev.Subject == "order:"+tc.order {
					var at struct{ Amount int64 }
					require.NoError(t, json.Unmarshal(ev.Attrs, &at))
					require.Equal(t, tc.amount, at.Amount)
					n++
				}
			}
			require.Equal(t, tc.refunds, n)
		})
	}
}
