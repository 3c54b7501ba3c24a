package systems

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

const ledgerSchema = `
CREATE TABLE accounts (
	id TEXT PRIMARY KEY,
	holder TEXT NOT NULL,
	status TEXT NOT NULL,
	currency TEXT NOT NULL
);
CREATE TABLE payouts (
	id TEXT PRIMARY KEY,
	account_id TEXT NOT NULL,
	amount INTEGER NOT NULL,
	currency TEXT NOT NULL,
	status TEXT NOT NULL,
	return_reason TEXT,
	created_at TEXT NOT NULL,
	returned_at TEXT
);
CREATE INDEX payouts_account ON payouts(account_id);
`

// Ledger refusal codes.
const (
	CodeAccountFrozen         = "account_frozen"
	CodePayoutAlreadyReturned = "payout_already_returned"
)

// AccountStatuses are the statuses an account may have.
var AccountStatuses = []string{"active", "frozen"}

// Account is a ledger account payouts are sent to.
type Account struct {
	ID       string `json:"id"`
	Holder   string `json:"holder"`
	Status   string `json:"status"`
	Currency string `json:"currency"`
}

// Payout is money sent to an account.
type Payout struct {
	ID           string `json:"id"`
	AccountID    string `json:"account_id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	Status       string `json:"status"`
	ReturnReason string `json:"return_reason,omitempty"`
}

// PayoutRequest is POST /ledger/payouts.
type PayoutRequest struct {
	AccountID string `json:"account_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
}

// LedgerSystem is accounts and payouts.
type LedgerSystem struct{ sys *System }

// NewLedger serves the ledger system over sys.
func NewLedger(sys *System) *LedgerSystem { return &LedgerSystem{sys: sys} }

// System returns the underlying system.
func (l *LedgerSystem) System() *System { return l.sys }

const (
	accountCols = `id, holder, status, currency`
	payoutCols  = `id, account_id, amount, currency, status, COALESCE(return_reason, '')`
)

func scanAccount(row interface{ Scan(...any) error }) (Account, error) {
	var a Account
	err := row.Scan(&a.ID, &a.Holder, &a.Status, &a.Currency)
	return a, err
}

// Routes registers the ledger routes.
func (l *LedgerSystem) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ledger/accounts/{id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return l.Account(r.Context(), r.PathValue("id")) })
	})
	mux.HandleFunc("POST /ledger/payouts", handleWrite(l.sys, func(tx *Tx, r *http.Request, req *PayoutRequest) (any, error) {
		return l.sendPayout(tx, *req)
	}))
	type returnReq struct {
		Reason string `json:"reason"`
	}
	mux.HandleFunc("POST /ledger/payouts/{payout_id}/return", handleWrite(l.sys, func(tx *Tx, r *http.Request, req *returnReq) (any, error) {
		return l.returnPayout(tx, r.PathValue("payout_id"), req.Reason)
	}))
	type statusReq struct {
		Status string `json:"status"`
	}
	mux.HandleFunc("POST /ledger/accounts/{id}/status", handleWrite(l.sys, func(tx *Tx, r *http.Request, req *statusReq) (any, error) {
		return l.setStatus(tx, r.PathValue("id"), req.Status)
	}))
}

// Account reads an account.
func (l *LedgerSystem) Account(ctx context.Context, id string) (Account, error) {
	a, err := scanAccount(l.sys.db.QueryRowContext(ctx, `SELECT `+accountCols+` FROM accounts WHERE id = ?`, id))
	if err != nil {
		return Account{}, missing(err, "account", id)
	}
	return a, nil
}

// SendPayout sends money to an account.
func (l *LedgerSystem) SendPayout(ctx context.Context, req PayoutRequest) (Payout, error) {
	return do(ctx, l.sys, func(tx *Tx) (Payout, error) { return l.sendPayout(tx, req) })
}

// ReturnPayout records that a payout came back (operator).
func (l *LedgerSystem) ReturnPayout(ctx context.Context, payoutID, reason string) (Payout, error) {
	return do(ctx, l.sys, func(tx *Tx) (Payout, error) { return l.returnPayout(tx, payoutID, reason) })
}

// SetAccountStatus freezes or unfreezes an account (operator).
func (l *LedgerSystem) SetAccountStatus(ctx context.Context, id, status string) (Account, error) {
	return do(ctx, l.sys, func(tx *Tx) (Account, error) { return l.setStatus(tx, id, status) })
}

func (l *LedgerSystem) sendPayout(tx *Tx, req PayoutRequest) (Payout, error) {
	switch {
	case req.AccountID == "":
		return Payout{}, invalid("account_id is required")
	case req.Amount <= 0:
		return Payout{}, refuse(http.StatusBadRequest, CodeInvalidAmount, "amount must be a positive integer in minor units, got %d", req.Amount)
	case !validCurrency(req.Currency):
		return Payout{}, invalid("currency must be a three-letter ISO code such as USD, got %q", req.Currency)
	}
	a, err := scanAccount(tx.QueryRow(`SELECT `+accountCols+` FROM accounts WHERE id = ?`, req.AccountID))
	if err != nil {
		return Payout{}, missing(err, "account", req.AccountID)
	}
	if req.Currency != a.Currency {
		return Payout{}, refuse(http.StatusBadRequest, CodeCurrencyMismatch, "payout currency %s does not match account %s's %s", req.Currency, a.ID, a.Currency)
	}
	if a.Status == "frozen" {
		return Payout{}, refuse(http.StatusForbidden, CodeAccountFrozen, "account %s is frozen", a.ID)
	}
	id, err := tx.NextID("po_", "payouts")
	if err != nil {
		return Payout{}, err
	}
	if _, err := tx.Exec(`INSERT INTO payouts(id, account_id, amount, currency, status, created_at) VALUES (?, ?, ?, ?, 'sent', ?)`,
		id, a.ID, req.Amount, req.Currency, fmtTime(tx.Now())); err != nil {
		return Payout{}, fmt.Errorf("send payout: %w", err)
	}
	if err := tx.Emit("payout_sent", "account:"+a.ID, map[string]any{"payout_id": id, "amount": req.Amount, "currency": req.Currency}); err != nil {
		return Payout{}, err
	}
	return Payout{ID: id, AccountID: a.ID, Amount: req.Amount, Currency: req.Currency, Status: "sent"}, nil
}

func (l *LedgerSystem) returnPayout(tx *Tx, payoutID, reason string) (Payout, error) {
	reason = strings.TrimSpace(reason)
	if len(reason) > maxText {
		return Payout{}, invalid("reason is longer than %d bytes", maxText)
	}
	var p Payout
	err := tx.QueryRow(`SELECT `+payoutCols+` FROM payouts WHERE id = ?`, payoutID).
		Scan(&p.ID, &p.AccountID, &p.Amount, &p.Currency, &p.Status, &p.ReturnReason)
	if err != nil {
		return Payout{}, missing(err, "payout", payoutID)
	}
	if p.Status == "returned" {
		return Payout{}, refuse(http.StatusConflict, CodePayoutAlreadyReturned, "payout %s was already returned", payoutID)
	}
	if _, err := tx.Exec(`UPDATE payouts SET status = 'returned', return_reason = ?, returned_at = ? WHERE id = ?`,
		reason, fmtTime(tx.Now()), payoutID); err != nil {
		return Payout{}, fmt.Errorf("return payout: %w", err)
	}
	if err := tx.Emit("payout_returned", "account:"+p.AccountID, map[string]any{
		"payout_id": p.ID, "amount": p.Amount, "currency": p.Currency, "reason": reason,
	}); err != nil {
		return Payout{}, err
	}
	p.Status, p.ReturnReason = "returned", reason
	return p, nil
}

func (l *LedgerSystem) setStatus(tx *Tx, id, status string) (Account, error) {
	if !slices.Contains(AccountStatuses, status) {
		return Account{}, invalid("status must be one of %s, got %q", strings.Join(AccountStatuses, ", "), status)
	}
	a, err := scanAccount(tx.QueryRow(`SELECT `+accountCols+` FROM accounts WHERE id = ?`, id))
	if err != nil {
		return Account{}, missing(err, "account", id)
	}
	if a.Status == status {
		return a, nil
	}
	if _, err := tx.Exec(`UPDATE accounts SET status = ? WHERE id = ?`, status, id); err != nil {
		return Account{}, fmt.Errorf("set account status: %w", err)
	}
	if err := tx.Emit("account_status_changed", "account:"+id, map[string]any{"status": status, "previous": a.Status}); err != nil {
		return Account{}, err
	}
	a.Status = status
	return a, nil
}

// Seed inserts accounts, emitting account_opened.
func (l *LedgerSystem) Seed(ctx context.Context, s *Seeder, accounts []Account) error {
	return l.sys.seed(ctx, func(tx *Tx) error {
		for _, a := range accounts {
			at := s.Stamp()
			if _, err := tx.Exec(`INSERT INTO accounts(`+accountCols+`) VALUES (?, ?, ?, ?)`, a.ID, a.Holder, a.Status, a.Currency); err != nil {
				return fmt.Errorf("account %s: %w", a.ID, err)
			}
			if err := tx.emitAt(at, "account_opened", "account:"+a.ID,
				map[string]any{"holder": a.Holder, "status": a.Status, "currency": a.Currency}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}
