package business

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// cancel: cancel a subscription, stop its billing, tell the customer on
// the ticket; never refund.
var cancel = Process{
	Name:        Cancel,
	Contract:    "cancel_subscription",
	SubjectType: "subscription",
	Write:       Write{System: "crm", Route: "POST /crm/subscriptions/{id}/cancel", Tool: "cancel_subscription"},
	base:        Base{Subject: "subscription:sub_1", Ticket: "t_4", Params: commitlayer.Attrs{}},
	Prompt: func(id string, _ commitlayer.Attrs) string {
		return fmt.Sprintf("Cancel subscription %s and stop its billing", id)
	},
	Report: func(id string, _ commitlayer.Attrs) string {
		return fmt.Sprintf("Cancelled subscription %s and stopped billing.", id)
	},
	Script: func(ctx context.Context, s Steps) error {
		id := s.ID()
		if _, err := s.Read(ctx, "get_subscription", map[string]any{"subscription_id": id}); err != nil {
			return err
		}
		if err := readTicket(ctx, s); err != nil {
			return err
		}
		if err := s.Call(ctx, "cancel_subscription", map[string]any{"subscription_id": id, "reason": "customer request"}); err != nil {
			return err
		}
		if err := s.Call(ctx, "stop_billing", map[string]any{"subscription_id": id}); err != nil {
			return err
		}
		return s.Note(ctx, fmt.Sprintf("Cancelled subscription %s and stopped its billing.", id))
	},
	// The policy reads the customer's orders (orders) to find refunds to
	// them (payments): cancelling is not refunding.
	Needs: Needs{Outcome: []string{"crm", "payments", "tickets"}, Policy: []string{"crm", "orders", "payments"}},
	Effects: []Effect{
		{System: "crm", Type: "subscription_status_changed", Attr: "status", Values: []string{"cancelled"}},
		{System: "payments", Type: "billing_stopped"},
		{System: "tickets", Type: "note_added"},
		{System: "payments", Type: "refund_created"}, // cancelling is not refunding
	},
}
