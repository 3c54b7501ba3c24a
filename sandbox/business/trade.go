package business

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// trade: place a limit order for a trading product, within the agent's
// daily notional.
var trade = Process{
	Name:        Trade,
	Contract:    "place_trade",
	SubjectType: "product",
	Params:      []string{"account_id", "side", "quantity", "limit_price"},
	Write:       Write{System: "broker", Route: "POST /broker/orders", Tool: "place_order"},
	base: Base{Subject: "product:p_acme", Params: commitlayer.Attrs{"account_id": "acc_1", "side": "buy",
		"quantity": int64(10), "limit_price": int64(15500)}},
	Prompt: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Place a %v order for %v of product %s at a limit of %v for account %v",
			p["side"], p["quantity"], id, p["limit_price"], p["account_id"])
	},
	Report: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Placed a %v order for %v of %s.", p["side"], p["quantity"], id)
	},
	Script: func(ctx context.Context, s Steps) error {
		id := s.ID()
		if _, err := s.Read(ctx, "get_product", map[string]any{"product_id": id}); err != nil {
			return err
		}
		return s.Call(ctx, "place_order", map[string]any{"product_id": id, "account_id": s.Param("account_id"),
			"side": s.Param("side"), "quantity": s.Param("quantity"), "limit_price": s.Param("limit_price")})
	},
	Needs: Needs{Outcome: []string{"broker"}, Policy: []string{"broker"}},
	Effects: []Effect{
		{System: "broker", Type: "order_placed"},
		{System: "broker", Type: "order_filled"},
	},
}
