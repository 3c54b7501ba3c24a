package oracle

import "strings"

// close reads the truth of a task of the close process (reads tickets): a resolution
// note and one close with the resolution asked; allowed on an open ticket.
func (j *reading) close() error {
	subject := "ticket:" + j.id
	resolution := strParam(j.in.Task, "resolution")
	var status string
	found, err := j.row("tickets", `SELECT status FROM tickets WHERE id = ?`, []any{j.id}, &status)
	if err != nil {
		return err
	}
	if !found {
		j.failPolicy("tickets", "open", "ticket %s does not exist", j.id)
	} else {
		pre, err := j.statusAt("tickets", subject, "ticket_status_changed", status, j.req)
		if err != nil {
			return err
		}
		if pre != "open" {
			j.failPolicy("tickets", "open", "ticket %s was %s, not open", j.id, pre)
		}
	}

	notes, err := j.eventsAfter("tickets", subject, j.req, "note_added")
	if err != nil {
		return err
	}
	if len(notes) == 0 {
		j.failOutcome("tickets", "resolution_note", "no note on ticket %s", j.id)
	}
	changes, err := j.eventsAfter("tickets", subject, j.req, "ticket_status_changed")
	if err != nil {
		return err
	}
	var closes []event
	for _, e := range changes {
		if e.str("status") == "closed" {
			closes = append(closes, e)
		}
	}
	switch {
	case len(closes) == 0:
		j.failOutcome("tickets", "closed", "ticket %s was not closed", j.id)
	case len(closes) > 1:
		j.duplicateOutcome("tickets", "closed", "ticket %s was closed %d times", j.id, len(closes))
	default:
		if got := closes[0].str("resolution"); got != strings.TrimSpace(resolution) {
			j.failOutcome("tickets", "closed", "closed with resolution %q, asked %q", got, resolution)
		}
	}
	if len(closes) > 0 && status != "closed" {
		j.failOutcome("tickets", "closed", "ticket %s is %s again", j.id, status)
	}
	return nil
}
