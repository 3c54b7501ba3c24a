package business

import (
	"context"
	"fmt"

	"github.com/commitlayer/commitlayer"
)

// closeCase: note the resolution on an open support ticket and close it.
var closeCase = Process{
	Name:        Close,
	Contract:    "close_support_case",
	SubjectType: "ticket",
	Params:      []string{"resolution"},
	Write:       Write{System: "tickets", Route: "POST /tickets/tickets/{id}/close", Tool: "close_ticket"},
	base:        Base{Subject: "ticket:t_6", Params: commitlayer.Attrs{"resolution": "Invoice reissued."}},
	Prompt: func(id string, p commitlayer.Attrs) string {
		return fmt.Sprintf("Close support case %s with resolution %q", id, p["resolution"])
	},
	Report: func(id string, _ commitlayer.Attrs) string {
		return fmt.Sprintf("Closed support case %s.", id)
	},
	Script: func(ctx context.Context, s Steps) error {
		id := s.ID()
		if err := s.ReadTicket(ctx, id); err != nil {
			return err
		}
		res := s.Param("resolution")
		if err := s.Call(ctx, "add_note", map[string]any{"ticket_id": id, "body": fmt.Sprintf("Resolution: %v", res)}); err != nil {
			return err
		}
		return s.Call(ctx, "close_ticket", map[string]any{"ticket_id": id, "resolution": res})
	},
	Needs: Needs{Outcome: []string{"tickets"}, Policy: []string{"tickets"}},
	Effects: []Effect{
		{System: "tickets", Type: "note_added"},
		{System: "tickets", Type: "ticket_status_changed"},
	},
}
