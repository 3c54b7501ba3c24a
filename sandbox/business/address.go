package business

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// address: change the shipping address of an order that has not shipped,
// tell the customer on the ticket.
var address = Process{
	Name:        Address,
	Contract:    "change_shipping_address",
	SubjectType: "order",
	Params:      []string{"address"},
	Write:       Write{System: "orders", Route: "POST /orders/orders/{id}/address", Tool: "change_address"},
	base: Base{Subject: "order:o_1003", Ticket: "t_3",
		Params: commitlayer.Attrs{"address": "7 Harbor Road, Norfolk"}},
	Prompt: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Change the shipping address of order %s to %q", id, p["address"])
	},
	Report: func(id string, _ commitlayer.Attrs) string {
		return fmt.Sprintf("Changed the shipping address of order %s.", id)
	},
	Script: func(ctx context.Context, s Steps) error {
		id := s.ID()
		if _, err := s.Read(ctx, "get_order", map[string]any{"order_id": id}); err != nil {
			return err
		}
		if err := readTicket(ctx, s); err != nil {
			return err
		}
		if err := s.Call(ctx, "change_address", map[string]any{"order_id": id, "address": s.Param("address")}); err != nil {
			return err
		}
		return s.Note(ctx, fmt.Sprintf("Changed the shipping address of order %s to %v.", id, s.Param("address")))
	},
	Needs: Needs{Outcome: []string{"orders", "tickets"}, Policy: []string{"orders"}},
	Effects: []Effect{
		{System: "orders", Type: "address_changed"},
		{System: "orders", Type: "order_status_changed", Attr: "status", Values: []string{"cancelled"}},
		{System: "tickets", Type: "note_added"},
	},
}
