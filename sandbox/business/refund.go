package business

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// refund: refund part or all of an order's charge, mark the order
// refunded, tell the customer on the ticket.
var refund = Process{
	Name:        Refund,
	Contract:    "refund_customer",
	SubjectType: "order",
	Params:      []string{"amount", "currency"},
	Write:       Write{System: "payments", Route: "POST /payments/refunds", Tool: "refund"},
	base: Base{Subject: "order:o_1001", Ticket: "t_1",
		Params: commitlayer.Attrs{"amount": int64(2500), "currency": "USD"}},
	Prompt: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Refund %v %v on order %s", p["amount"], p["currency"], id)
	},
	Report: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Refunded %s on order %s.", Money(p["amount"], p["currency"]), id)
	},
	Script: func(ctx context.Context, s Steps) error {
		id := s.ID()
		if _, err := s.Read(ctx, "get_order", map[string]any{"order_id": id}); err != nil {
			return err
		}
		if err := readTicket(ctx, s); err != nil {
			return err
		}
		if err := s.Call(ctx, "refund", map[string]any{"order_id": id, "amount": s.Param("amount"),
			"currency": s.Param("currency"), "reason": "requested_by_customer"}); err != nil {
			return err
		}
		if err := s.Call(ctx, "update_order_status", map[string]any{"order_id": id, "status": "refunded"}); err != nil {
			return err
		}
		return s.Note(ctx, fmt.Sprintf("Refunded %s on order %s.", Money(s.Param("amount"), s.Param("currency")), id))
	},
	Needs: Needs{Outcome: []string{"payments", "orders", "tickets"}, Policy: []string{"orders"}},
	Effects: []Effect{
		{System: "payments", Type: "refund_created"},
		{System: "orders", Type: "order_status_changed", Attr: "status", Values: []string{"refunded", "cancelled"}},
		{System: "tickets", Type: "note_added"},
	},
}
