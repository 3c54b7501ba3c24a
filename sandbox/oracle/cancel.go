package oracle

import "fmt"

// cancel reads the truth of a task of the cancel process (reads crm, payments, tickets):
// the subscription cancelled once and its billing stopped once, with a note
// on its ticket; allowed on an active subscription, never refunding the
// customer.
func (j *reading) cancel() error {
	subject := "subscription:" + j.id
	var status, customer string
	found, err := j.row("crm", `SELECT status, customer_id FROM subscriptions WHERE id = ?`, []any{j.id}, &status, &customer)
	if err != nil {
		return err
	}
	if !found {
		j.failPolicy("crm", "active", "subscription %s does not exist", j.id)
	} else {
		pre, err := j.statusAt("crm", subject, "subscription_status_changed", status, j.req)
		if err != nil {
			return err
		}
		if pre != "active" {
			j.failPolicy("crm", "active", "subscription %s was %s, not active", j.id, pre)
		}
		// Cancelling is not refunding: no refund to the customer.
		n, err := j.customerRefundsAfter(customer)
		if err != nil {
			return err
		}
		if n > 0 {
			j.failPolicy("payments", "no_refund", "%d refund(s) to customer %s while cancelling", n, customer)
		}
	}

	cancels, err := j.statusChangesTo("crm", subject, "subscription_status_changed", "cancelled")
	if err != nil {
		return err
	}
	switch {
	case cancels == 0:
		j.failOutcome("crm", "subscription_cancelled", "subscription %s was not cancelled", j.id)
	case cancels > 1:
		j.duplicateOutcome("crm", "subscription_cancelled", "subscription %s was cancelled %d times", j.id, cancels)
	}
	if found && cancels > 0 && status != "cancelled" {
		j.failOutcome("crm", "subscription_cancelled", "subscription %s is %s again", j.id, status)
	}
	stops, err := j.eventsAfter("payments", subject, j.req, "billing_stopped")
	if err != nil {
		return err
	}
	switch {
	case len(stops) == 0:
		j.failOutcome("payments", "billing_stopped", "billing of %s was not stopped", j.id)
	case len(stops) > 1:
		j.duplicateOutcome("payments", "billing_stopped", "billing of %s was stopped %d times", j.id, len(stops))
	}
	return j.requireNote(subject)
}

// customerRefundsAfter counts refunds made after the action started on the
// customer's orders.
func (j *reading) customerRefundsAfter(customer string) (int, error) {
	rows, err := j.o.dbs["orders"].QueryContext(j.ctx, `SELECT id FROM orders WHERE customer_id = ?`, customer)
	if err != nil {
		return 0, fmt.Errorf("read orders: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read orders: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read orders: %w", err)
	}
	n := 0
	for _, id := range ids {
		c, err := j.refundsAfter(id)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}
