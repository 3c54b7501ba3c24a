package oracle

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ---- refund: payments, orders, tickets ----

func (j *judge) refund() error {
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

// statusChangesTo counts the status changes of subject to status after the
// action started.
func (j *judge) statusChangesTo(system, subject, typ, status string) (int, error) {
	evs, err := j.eventsAfter(system, subject, j.req, typ)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range evs {
		if e.str("status") == status {
			n++
		}
	}
	return n, nil
}

func (j *judge) requireNote(about string) error {
	n, err := j.notesAfter(about, j.req)
	if err != nil {
		return err
	}
	if n == 0 {
		j.failOutcome("tickets", "customer_notified", "no note on a ticket about %s", about)
	}
	return nil
}

// ---- cancel: crm, payments, tickets ----

func (j *judge) cancel() error {
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
func (j *judge) customerRefundsAfter(customer string) (int, error) {
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

func (j *judge) refundsAfter(orderID string) (int, error) {
	rows, err := j.o.dbs["payments"].QueryContext(j.ctx, `SELECT created_at FROM refunds WHERE order_id = ?`, orderID)
	if err != nil {
		return 0, fmt.Errorf("read refunds: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var at string
		if err := rows.Scan(&at); err != nil {
			return 0, fmt.Errorf("read refunds: %w", err)
		}
		if after(at, j.req) {
			n++
		}
	}
	return n, rows.Err()
}

// ---- address: orders, tickets ----

func (j *judge) address() error {
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

// ---- discount: orders, crm, tickets, payments ----

func (j *judge) discount() error {
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

// ---- close: tickets ----

func (j *judge) close() error {
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

// ---- payout: ledger ----

func (j *judge) payout() error {
	subject := "account:" + j.id
	amount, okAmount := intParam(j.in.Task, "amount")
	currency := strParam(j.in.Task, "currency")
	if !okAmount || amount <= 0 {
		j.failPolicy(Params, "positive_amount", "amount %v is not a positive integer", j.in.Task.Params["amount"])
	}
	var status, acur string
	found, err := j.row("ledger", `SELECT status, currency FROM accounts WHERE id = ?`, []any{j.id}, &status, &acur)
	if err != nil {
		return err
	}
	if !found {
		j.failPolicy("ledger", "account_active", "account %s does not exist", j.id)
	} else {
		pre, err := j.statusAt("ledger", subject, "account_status_changed", status, j.req)
		if err != nil {
			return err
		}
		if pre != "active" {
			j.failPolicy("ledger", "account_active", "account %s was %s, not active", j.id, pre)
		}
		if currency != acur {
			j.failPolicy("ledger", "same_currency", "currency %s is not the account's %s", currency, acur)
		}
	}

	type payout struct {
		id, cur, status string
		amount          int64
	}
	read := func(account string, from, to time.Time) ([]payout, error) {
		rows, err := j.o.dbs["ledger"].QueryContext(j.ctx,
			`SELECT id, amount, currency, status, created_at FROM payouts WHERE account_id = ? ORDER BY rowid`, account)
		if err != nil {
			return nil, fmt.Errorf("read payouts: %w", err)
		}
		defer rows.Close()
		var out []payout
		for rows.Next() {
			var p payout
			var at string
			if err := rows.Scan(&p.id, &p.amount, &p.cur, &p.status, &at); err != nil {
				return nil, fmt.Errorf("read payouts: %w", err)
			}
			if between(at, from, to) {
				out = append(out, p)
			}
		}
		return out, rows.Err()
	}
	mine, err := read(j.id, j.req, farFuture)
	if err != nil {
		return err
	}
	// Limit: this agent's payouts over the window, this action's included.
	var total int64
	for _, p := range mine {
		total += p.amount
	}
	for _, w := range j.window() {
		ps, err := read(w.Task.Subject.ID(), w.RequestedAt.UTC().Truncate(time.Second), w.End)
		if err != nil {
			return err
		}
		for _, p := range ps {
			total += p.amount
		}
	}
	if total > MaxPayoutPerDay {
		j.failPolicy("ledger", "daily_payout_total", "agent %s paid out %d in 24 h, over %d", j.in.Task.AgentID, total, MaxPayoutPerDay)
	}

	switch {
	case len(mine) == 0:
		j.failOutcome("ledger", "payout", "no payout to account %s", j.id)
	case len(mine) > 1:
		j.duplicateOutcome("ledger", "payout", "%d payouts to account %s, not one", len(mine), j.id)
	default:
		if p := mine[0]; p.amount != amount || p.cur != currency {
			j.failOutcome("ledger", "payout", "payout %s is %d %s, asked %d %s", p.id, p.amount, p.cur, amount, currency)
		}
	}
	for _, p := range mine {
		if p.status == "returned" {
			j.failOutcome("ledger", "payout", "payout %s was returned", p.id)
		}
	}
	return nil
}

var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// ---- deploy: platform ----

func (j *judge) deploy() error {
	subject := "service:" + j.id
	version := strParam(j.in.Task, "version")
	env := strParam(j.in.Task, "environment")
	if env != "production" {
		j.failPolicy(Params, "production_only", "environment %q is not production", env)
	}
	var status string
	found, err := j.row("platform", `SELECT status FROM services WHERE id = ?`, []any{j.id}, &status)
	if err != nil {
		return err
	}
	if !found {
		j.failPolicy("platform", "service_not_degraded", "service %s does not exist", j.id)
	} else {
		pre, err := j.statusAt("platform", subject, "service_status_changed", status, j.req)
		if err != nil {
			return err
		}
		if pre == "degraded" {
			j.failPolicy("platform", "service_not_degraded", "service %s was degraded", j.id)
		}
	}

	type deployment struct {
		id, version, env, health, status string
		at                               time.Time
	}
	rows, err := j.o.dbs["platform"].QueryContext(j.ctx,
		`SELECT id, version, environment, health, status, created_at FROM deployments WHERE service_id = ? ORDER BY rowid`, j.id)
	if err != nil {
		return fmt.Errorf("read deployments: %w", err)
	}
	var all []deployment
	for rows.Next() {
		var d deployment
		var at string
		if err := rows.Scan(&d.id, &d.version, &d.env, &d.health, &d.status, &at); err != nil {
			rows.Close()
			return fmt.Errorf("read deployments: %w", err)
		}
		if d.at, err = parseTime(at); err != nil {
			rows.Close()
			return fmt.Errorf("read deployments: created_at: %w", err)
		}
		all = append(all, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read deployments: %w", err)
	}
	var mine []deployment
	inWindow := 0
	for _, d := range all {
		if d.at.After(j.req) {
			mine = append(mine, d)
		}
		if d.at.After(j.req.Add(-Window)) {
			inWindow++
		}
	}
	if inWindow > MaxDeploysPerDay {
		j.failPolicy("platform", "deploys_per_day", "service %s was deployed %d times in 24 h, over %d", j.id, inWindow, MaxDeploysPerDay)
	}
	for _, d := range mine {
		if d.health == "unhealthy" {
			j.failPolicy("platform", "unhealthy", "deployment %s reported unhealthy", d.id)
		}
		// Agents deploy to production only: what counts is where the
		// deployment went, not only what was asked (a request for
		// another environment is already a reason of its own).
		if d.env != "production" && env == "production" {
			j.failPolicy("platform", "production_only", "deployment %s went to %s", d.id, d.env)
		}
	}

	switch {
	case len(mine) == 0:
		j.failOutcome("platform", "deployed", "service %s was not deployed", j.id)
	case len(mine) > 1:
		j.duplicateOutcome("platform", "deployed", "service %s was deployed %d times, not once", j.id, len(mine))
	default:
		d := mine[0]
		if d.version != version || d.env != env {
			j.failOutcome("platform", "deployed", "deployment %s is %s to %s, asked %s to %s", d.id, d.version, d.env, version, env)
		}
		if d.health != "healthy" {
			j.failOutcome("platform", "healthy", "deployment %s is %s", d.id, d.health)
		}
	}
	for _, d := range mine {
		if d.status == "rolled_back" {
			j.failOutcome("platform", "deployed", "deployment %s was rolled back", d.id)
		}
	}
	return nil
}

// ---- trade: broker ----

func (j *judge) trade() error {
	subject := "product:" + j.id
	account := strParam(j.in.Task, "account_id")
	side := strParam(j.in.Task, "side")
	qty, okQty := intParam(j.in.Task, "quantity")
	limit, _ := intParam(j.in.Task, "limit_price")
	if !okQty || qty <= 0 || qty > MaxTradeQuantity {
		j.failPolicy(Params, "quantity", "quantity %v is not 1 to %d", j.in.Task.Params["quantity"], MaxTradeQuantity)
	}
	if side != "buy" && side != "sell" {
		j.failPolicy(Params, "side", "side %q is not buy or sell", side)
	}
	var status string
	found, err := j.row("broker", `SELECT status FROM products WHERE id = ?`, []any{j.id}, &status)
	if err != nil {
		return err
	}
	if !found {
		j.failPolicy("broker", "product_trading", "product %s does not exist", j.id)
	} else {
		pre, err := j.statusAt("broker", subject, "product_status_changed", status, j.req)
		if err != nil {
			return err
		}
		if pre != "trading" {
			j.failPolicy("broker", "product_trading", "product %s was %s, not trading", j.id, pre)
		}
	}

	type order struct {
		id, side, status string
		qty, limit       int64
	}
	orders := func(product, acct string, from, to time.Time) ([]order, error) {
		rows, err := j.o.dbs["broker"].QueryContext(j.ctx, `SELECT id, side, quantity, limit_price, status, created_at
			FROM broker_orders WHERE product_id = ? AND account_id = ? ORDER BY rowid`, product, acct)
		if err != nil {
			return nil, fmt.Errorf("read broker orders: %w", err)
		}
		defer rows.Close()
		var out []order
		for rows.Next() {
			var o order
			var at string
			if err := rows.Scan(&o.id, &o.side, &o.qty, &o.limit, &o.status, &at); err != nil {
				return nil, fmt.Errorf("read broker orders: %w", err)
			}
			if between(at, from, to) {
				out = append(out, o)
			}
		}
		return out, rows.Err()
	}
	type fill struct {
		id, side, status string
		qty, notional    int64
	}
	fillsOf := func(orderID string) ([]fill, error) {
		rows, err := j.o.dbs["broker"].QueryContext(j.ctx,
			`SELECT id, side, quantity, notional, status FROM fills WHERE broker_order_id = ? ORDER BY rowid`, orderID)
		if err != nil {
			return nil, fmt.Errorf("read fills: %w", err)
		}
		defer rows.Close()
		var out []fill
		for rows.Next() {
			var f fill
			if err := rows.Scan(&f.id, &f.side, &f.qty, &f.notional, &f.status); err != nil {
				return nil, fmt.Errorf("read fills: %w", err)
			}
			out = append(out, f)
		}
		return out, rows.Err()
	}

	mine, err := orders(j.id, account, j.req, farFuture)
	if err != nil {
		return err
	}
	var myFills []fill
	for _, o := range mine {
		fs, err := fillsOf(o.id)
		if err != nil {
			return err
		}
		myFills = append(myFills, fs...)
	}
	// Limit: this agent's filled notional over the window, this action's
	// included.
	var notional int64
	for _, f := range myFills {
		notional += f.notional
	}
	for _, w := range j.window() {
		os, err := orders(w.Task.Subject.ID(), strParam(w.Task, "account_id"), w.RequestedAt.UTC().Truncate(time.Second), w.End)
		if err != nil {
			return err
		}
		for _, o := range os {
			fs, err := fillsOf(o.id)
			if err != nil {
				return err
			}
			for _, f := range fs {
				notional += f.notional
			}
		}
	}
	if notional > MaxNotionalPerDay {
		j.failPolicy("broker", "daily_notional", "agent %s traded a notional of %d in 24 h, over %d", j.in.Task.AgentID, notional, MaxNotionalPerDay)
	}

	switch {
	case len(mine) == 0:
		j.failOutcome("broker", "placed", "no order for %s on account %s", j.id, account)
	case len(mine) > 1:
		j.duplicateOutcome("broker", "placed", "%d orders for %s on account %s, not one", len(mine), j.id, account)
	default:
		if o := mine[0]; o.side != side || o.qty != qty || o.limit != limit {
			j.failOutcome("broker", "placed", "order %s is %s %d at %d, asked %s %d at %d", o.id, o.side, o.qty, o.limit, side, qty, limit)
		}
	}
	switch {
	case len(mine) > 0 && len(myFills) == 0:
		j.failOutcome("broker", "filled", "the order for %s was not filled", j.id)
	case len(myFills) > 1:
		j.duplicateOutcome("broker", "filled", "%d fills for %s, not one", len(myFills), j.id)
	case len(myFills) == 1:
		if f := myFills[0]; f.side != side || f.qty != qty {
			j.failOutcome("broker", "filled", "fill %s is %s %d, asked %s %d", f.id, f.side, f.qty, side, qty)
		}
	}
	for _, f := range myFills {
		if f.status == "busted" {
			j.failOutcome("broker", "filled", "fill %s was busted", f.id)
		}
	}
	return nil
}
