package oracle

import (
	"slices"
	"strings"
)

// address reads the truth of a task of the address process (reads orders, tickets): the
// address changed once to the one asked, with a note on the order's ticket;
// allowed while the order has not shipped, never cancelling it.
func (j *reading) address() error {
	subject := "order:" + j.id
	want := strParam(j.in.Task, "address")
	if strings.TrimSpace(want) == "" {
		j.failPolicy(Params, "address_given", "the address is empty")
	}
	var status, current string
	found, err := j.row("orders", `SELECT status, address FROM orders WHERE id = ?`, []any{j.id}, &status, &current)
	if err != nil {
		return err
	}
	if !found {
		j.failPolicy("orders", "not_shipped", "order %s does not exist", j.id)
	} else {
		pre, err := j.statusAt("orders", subject, "order_status_changed", status, j.req)
		if err != nil {
			return err
		}
		if slices.Contains([]string{"shipped", "delivered", "cancelled"}, pre) {
			j.failPolicy("orders", "not_shipped", "order %s was %s", j.id, pre)
		}
	}
	cancels, err := j.statusChangesTo("orders", subject, "order_status_changed", "cancelled")
	if err != nil {
		return err
	}
	if cancels > 0 {
		j.failPolicy("orders", "no_cancellation", "order %s was cancelled", j.id)
	}

	changes, err := j.eventsAfter("orders", subject, j.req, "address_changed")
	if err != nil {
		return err
	}
	switch {
	case len(changes) == 0:
		j.failOutcome("orders", "address_changed", "the address of order %s did not change", j.id)
	case len(changes) > 1:
		j.duplicateOutcome("orders", "address_changed", "the address of order %s changed %d times", j.id, len(changes))
	default:
		if got := changes[0].str("address"); got != want {
			j.failOutcome("orders", "address_changed", "address set to %q, asked %q", got, want)
		}
	}
	if len(changes) > 0 && current != want {
		j.failOutcome("orders", "address_changed", "the address of order %s is %q now", j.id, current)
	}
	return j.requireNote(subject)
}
