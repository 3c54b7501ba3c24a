package business

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// discount: apply a percentage discount to a gold or silver customer's
// order, tell the customer on the ticket; never refund.
var discount = Process{
	Name:        Discount,
	Contract:    "approve_discount",
	SubjectType: "order",
	Params:      []string{"percent"},
	Write:       Write{System: "orders", Route: "POST /orders/orders/{id}/discounts", Tool: "approve_discount"},
	base:        Base{Subject: "order:o_1001", Ticket: "t_1", Params: commitlayer.Attrs{"percent": int64(10)}},
	Prompt: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Apply a %v%% discount to order %s", p["percent"], id)
	},
	Report: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Applied a %v%% discount to order %s.", p["percent"], id)
	},
	Script: func(ctx context.Context, s Steps) error {
		id := s.ID()
		order, err := s.Read(ctx, "get_order", map[string]any{"order_id": id})
		if err != nil {
			return err
		}
		cust, _ := order["customer_id"].(string)
		if cust == "" {
			return s.Fail("get_order", "the order has no customer_id")
		}
		if _, err := s.Read(ctx, "get_customer", map[string]any{"customer_id": cust}); err != nil {
			return err
		}
		if err := readTicket(ctx, s); err != nil {
			return err
		}
		if err := s.Call(ctx, "approve_discount", map[string]any{"order_id": id, "percent": s.Param("percent")}); err != nil {
			return err
		}
		return s.Note(ctx, fmt.Sprintf("Applied a %v%% discount to order %s.", s.Param("percent"), id))
	},
	Needs: Needs{Outcome: []string{"orders", "tickets"}, Policy: []string{"orders", "crm", "payments"}},
	Effects: []Effect{
		{System: "orders", Type: "discount_applied"},
		{System: "tickets", Type: "note_added"},
		{System: "payments", Type: "refund_created"}, // a discount is not a refund
	},
}
