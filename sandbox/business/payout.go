package business

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// payout: send money out of an active account, within the agent's daily
// total.
var payout = Process{
	Name:        Payout,
	Contract:    "send_payout",
	SubjectType: "account",
	Params:      []string{"amount", "currency"},
	Write:       Write{System: "ledger", Route: "POST /ledger/payouts", Tool: "send_payout"},
	base:        Base{Subject: "account:acc_1", Params: commitlayer.Attrs{"amount": int64(120000), "currency": "USD"}},
	Prompt: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Send a payout of %v %v to account %s", p["amount"], p["currency"], id)
	},
	Report: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Sent %s to account %s.", Money(p["amount"], p["currency"]), id)
	},
	Script: func(ctx context.Context, s Steps) error {
		id := s.ID()
		if _, err := s.Read(ctx, "get_account", map[string]any{"account_id": id}); err != nil {
			return err
		}
		return s.Call(ctx, "send_payout", map[string]any{"account_id": id, "amount": s.Param("amount"),
			"currency": s.Param("currency")})
	},
	Needs:   Needs{Outcome: []string{"ledger"}, Policy: []string{"ledger"}},
	Effects: []Effect{{System: "ledger", Type: "payout_sent"}},
}
