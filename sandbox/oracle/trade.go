package oracle

import (
	"fmt"
	"time"
)

// Trade limits: the largest order, and an agent's filled notional over
// Window in minor units.
const (
	MaxTradeQuantity  = 1000
	MaxNotionalPerDay = 10_000_000
)

// trade reads the truth of a task of the trade process (reads broker): one order as
// asked and one fill of it, not busted; allowed on a trading product, within
// the quantity limit and the agent's daily notional.
func (j *reading) trade() error {
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
