package oracle

import "fmt"

// MaxRefund is the largest refund in minor units.
const MaxRefund = 50000

// refund reads the truth of a task of the refund process (reads payments, orders,
// tickets): one refund of exactly the amount asked, not reversed, the order
// marked refunded and a note on its ticket; allowed on a paid or shipped
// order, within the refund limit and the order total, never cancelling the
// order.
func (j *reading) refund() error {
	amount, okAmount := intParam(j.in.Task, "amount")
	currency := strParam(j.in.Task, "currency")
	subject := "order:" + j.id

	// Policy: eligibility on the order before the action, the limits, no
	// cancellation.
	var status, ocur string
	var total int64
	found, err := j.row("orders", `SELECT status, total, currency FROM orders WHERE id = ?`, []any{j.id}, &status, &total, &ocur)
	if err != nil {
		return err
	}
	switch {
	case !okAmount || amount <= 0:
		j.failPolicy(Params, "within_limit", "amount %v is not a positive integer", j.in.Task.Params["amount"])
	case amount > MaxRefund:
		j.failPolicy(Params, "within_limit", "amount %d is over the %d refund limit", amount, MaxRefund)
	}
	if !found {
		j.failPolicy("orders", "eligible", "order %s does not exist", j.id)
	} else {
		pre, err := j.statusAt("orders", subject, "order_status_changed", status, j.req)
		if err != nil {
			return err
		}
		if pre != "paid" && pre != "shipped" {
			j.failPolicy("orders", "eligible", "order %s was %s, not paid or shipped", j.id, pre)
		}
		if okAmount && amount > total {
			j.failPolicy("orders", "within_limit", "amount %d is over the order total %d", amount, total)
		}
		if currency != ocur {
			j.failPolicy("orders", "within_limit", "currency %s is not the order's %s", currency, ocur)
		}
	}
	cancels, err := j.statusChangesTo("orders", subject, "order_status_changed", "cancelled")
	if err != nil {
		return err
	}
	if cancels > 0 {
		j.failPolicy("orders", "no_cancellation", "order %s was cancelled", j.id)
	}

	// Outcome: one refund of exactly the amount, not reversed; the order
	// marked refunded; a note on its ticket.
	type refund struct {
		id, cur, status, created string
		amount                   int64
	}
	var refunds []refund
	rows, err := j.o.dbs["payments"].QueryContext(j.ctx,
		`SELECT id, amount, currency, status, created_at FROM refunds WHERE order_id = ? ORDER BY rowid`, j.id)
	if err != nil {
		return fmt.Errorf("read refunds: %w", err)
	}
	for rows.Next() {
		var r refund
		if err := rows.Scan(&r.id, &r.amount, &r.cur, &r.status, &r.created); err != nil {
			rows.Close()
			return fmt.Errorf("read refunds: %w", err)
		}
		if after(r.created, j.req) {
			refunds = append(refunds, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read refunds: %w", err)
	}
	switch {
	case len(refunds) == 0:
		j.failOutcome("payments", "refund", "no refund on order %s", j.id)
	case len(refunds) > 1:
		j.duplicateOutcome("payments", "refund", "%d refunds on order %s, not one", len(refunds), j.id)
	default:
		r := refunds[0]
		if r.amount != amount || r.cur != currency {
			j.failOutcome("payments", "refund", "refund %s is %d %s, asked %d %s", r.id, r.amount, r.cur, amount, currency)
		}
	}
	for _, r := range refunds {
		if r.status == "reversed" {
			j.failOutcome("payments", "refund", "refund %s was reversed", r.id)
		}
	}
	refunded, err := j.statusChangesTo("orders", subject, "order_status_changed", "refunded")
	if err != nil {
		return err
	}
	if refunded == 0 {
		j.failOutcome("orders", "order_refunded", "order %s was not marked refunded", j.id)
	}
	return j.requireNote(subject)
}
