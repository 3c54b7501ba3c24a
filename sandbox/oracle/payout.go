package oracle

import (
	"fmt"
	"time"
)

// MaxPayoutPerDay is an agent's payout allowance over Window, in minor units.
const MaxPayoutPerDay = 500000

// payout reads the truth of a task of the payout process (reads ledger): one payout of
// exactly the amount asked, not returned; allowed out of an active account
// in its currency, within the agent's daily total.
func (j *reading) payout() error {
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
