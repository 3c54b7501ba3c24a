package oracle

import "fmt"

// MaxDiscountPercent is the largest discount.
const MaxDiscountPercent = 20

// discount reads the truth of a task of the discount process (reads orders, crm,
// tickets, payments): one discount of the percent asked, with a note on the
// order's ticket; allowed up to the discount limit for gold and silver
// customers, never refunding the order.
func (j *reading) discount() error {
	subject := "order:" + j.id
	percent, ok := intParam(j.in.Task, "percent")
	if !ok || percent < 1 || percent > MaxDiscountPercent {
		j.failPolicy(Params, "within_limit", "discount of %v%% is not 1 to %d", j.in.Task.Params["percent"], MaxDiscountPercent)
	}
	var customer string
	found, err := j.row("orders", `SELECT customer_id FROM orders WHERE id = ?`, []any{j.id}, &customer)
	if err != nil {
		return err
	}
	if !found {
		j.failPolicy("orders", "customer_tier", "order %s does not exist", j.id)
	} else {
		var tier string
		ok, err := j.row("crm", `SELECT tier FROM customers WHERE id = ?`, []any{customer}, &tier)
		if err != nil {
			return err
		}
		if !ok {
			j.failPolicy("crm", "customer_tier", "customer %s does not exist", customer)
		} else if tier != "gold" && tier != "silver" {
			j.failPolicy("crm", "customer_tier", "customer %s is %s, not gold or silver", customer, tier)
		}
	}
	refunds, err := j.refundsAfter(j.id)
	if err != nil {
		return err
	}
	if refunds > 0 {
		j.failPolicy("payments", "no_refund", "order %s was refunded", j.id)
	}

	rows, err := j.o.dbs["orders"].QueryContext(j.ctx, `SELECT id, percent, created_at FROM discounts WHERE order_id = ? ORDER BY rowid`, j.id)
	if err != nil {
		return fmt.Errorf("read discounts: %w", err)
	}
	type disc struct {
		id      string
		percent int64
	}
	var ds []disc
	for rows.Next() {
		var d disc
		var at string
		if err := rows.Scan(&d.id, &d.percent, &at); err != nil {
			rows.Close()
			return fmt.Errorf("read discounts: %w", err)
		}
		if after(at, j.req) {
			ds = append(ds, d)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read discounts: %w", err)
	}
	switch {
	case len(ds) == 0:
		j.failOutcome("orders", "discount_applied", "no discount on order %s", j.id)
	case len(ds) > 1:
		j.duplicateOutcome("orders", "discount_applied", "%d discounts on order %s, not one", len(ds), j.id)
	case ds[0].percent != percent:
		j.failOutcome("orders", "discount_applied", "discount %s is %d%%, asked %d%%", ds[0].id, ds[0].percent, percent)
	}
	return j.requireNote(subject)
}
