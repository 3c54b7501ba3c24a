package systems

import (
	"context"
	"fmt"
	"net/http"
)

const paymentsSchema = `
CREATE TABLE charges (
	id TEXT PRIMARY KEY,
	order_id TEXT NOT NULL UNIQUE,
	amount INTEGER NOT NULL,
	refunded INTEGER NOT NULL DEFAULT 0,
	currency TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE TABLE refunds (
	id TEXT PRIMARY KEY,
	charge_id TEXT NOT NULL,
	order_id TEXT NOT NULL,
	amount INTEGER NOT NULL,
	currency TEXT NOT NULL,
	reason TEXT NOT NULL,
	status TEXT NOT NULL,
	created_at TEXT NOT NULL,
	reversed_at TEXT
);
CREATE INDEX refunds_order ON refunds(order_id);
CREATE TABLE billing (
	subscription_id TEXT PRIMARY KEY,
	status TEXT NOT NULL,
	stopped_at TEXT
);
`

// Payments refusal codes.
const (
	CodeInvalidAmount          = "invalid_amount"
	CodeAmountTooLarge         = "amount_too_large"
	CodeChargeAlreadyRefunded  = "charge_already_refunded"
	CodeBillingAlreadyStopped  = "billing_already_stopped"
	CodeRefundAlreadyReversed  = "refund_already_reversed"
	CodeCurrencyMismatch       = "currency_mismatch"
	refundStatusSucceeded      = "succeeded"
	refundStatusReversed       = "reversed"
	billingActive, billingStop = "active", "stopped"
)

// Charge is a captured payment for an order.
type Charge struct {
	ID       string `json:"id"`
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Refunded int64  `json:"refunded"`
	Currency string `json:"currency"`
}

// Refund is money returned against a charge.
type Refund struct {
	ID       string `json:"id"`
	ChargeID string `json:"charge_id"`
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Reason   string `json:"reason"`
	Status   string `json:"status"`
}

// RefundRequest is POST /payments/refunds.
type RefundRequest struct {
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Reason   string `json:"reason,omitempty"`
	// IdempotencyKey is the caller's key, for a backend that forwards it
	// (Stripe); the sandbox enforces idempotency itself either way.
	IdempotencyKey string `json:"-"`
}

// StopBillingRequest is POST /payments/billing/stop.
type StopBillingRequest struct {
	SubscriptionID string `json:"subscription_id"`
}

// BillingStop is the result of stopping a subscription's billing.
type BillingStop struct {
	SubscriptionID string `json:"subscription_id"`
	Status         string `json:"status"`
}

// PaymentsBackend is where the payments system's money moves: the SQLite
// fake now, Stripe test mode later. Writes receive the payments system's
// transaction, so the events they emit commit with the write.
type PaymentsBackend interface {
	Charge(ctx context.Context, orderID string) (Charge, error)
	CreateRefund(tx *Tx, req RefundRequest) (Refund, error)
	StopBilling(tx *Tx, req StopBillingRequest) (BillingStop, error)
}

// ChargeSeeder is a PaymentsBackend that places the seeded charges in an
// outside system before they are written locally (Stripe: one confirmed
// PaymentIntent per charge). It returns the charge's id there, which the
// local charge row and its charge_captured event then carry. It is called
// outside any local write.
type ChargeSeeder interface {
	SeedCharge(ctx context.Context, c SeedCharge) (chargeID string, err error)
}

// FakePayments is the SQLite-backed PaymentsBackend.
type FakePayments struct {
	sys *System
}

var _ PaymentsBackend = (*FakePayments)(nil)

// NewFakePayments returns the fake backend over the payments system's file.
func NewFakePayments(sys *System) *FakePayments { return &FakePayments{sys: sys} }

// Charge reads the charge of an order.
func (f *FakePayments) Charge(ctx context.Context, orderID string) (Charge, error) {
	var c Charge
	err := f.sys.db.QueryRowContext(ctx, `SELECT id, order_id, amount, refunded, currency FROM charges WHERE order_id = ?`, orderID).
		Scan(&c.ID, &c.OrderID, &c.Amount, &c.Refunded, &c.Currency)
	if err != nil {
		return Charge{}, missing(err, "charge for order", orderID)
	}
	return c, nil
}

// CreateRefund refunds part or all of an order's charge. Like Stripe, it
// answers 400 (stored under an Idempotency-Key) for a charge already fully
// refunded and for an amount above what is left on the charge.
func (f *FakePayments) CreateRefund(tx *Tx, req RefundRequest) (Refund, error) {
	if err := ValidateRefund(req); err != nil {
		return Refund{}, err
	}
	var c Charge
	err := tx.QueryRow(`SELECT id, order_id, amount, refunded, currency FROM charges WHERE order_id = ?`, req.OrderID).
		Scan(&c.ID, &c.OrderID, &c.Amount, &c.Refunded, &c.Currency)
	if err != nil {
		return Refund{}, missing(err, "charge for order", req.OrderID)
	}
	switch {
	case req.Currency != c.Currency:
		return Refund{}, refuse(http.StatusBadRequest, CodeCurrencyMismatch,
			"refund currency %s does not match the charge's %s", req.Currency, c.Currency)
	case c.Refunded >= c.Amount:
		return Refund{}, Decline(CodeChargeAlreadyRefunded, "charge %s has already been refunded", c.ID)
	case req.Amount > c.Amount-c.Refunded:
		return Refund{}, Decline(CodeAmountTooLarge,
			"refund of %d is greater than the %d left on charge %s", req.Amount, c.Amount-c.Refunded, c.ID)
	}
	id, err := tx.NextID("re_", "refunds")
	if err != nil {
		return Refund{}, err
	}
	now := fmtTime(tx.Now())
	if _, err := tx.Exec(`INSERT INTO refunds(id, charge_id, order_id, amount, currency, reason, status, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, c.ID, c.OrderID, req.Amount, req.Currency, req.Reason, refundStatusSucceeded, now); err != nil {
		return Refund{}, fmt.Errorf("insert refund: %w", err)
	}
	if _, err := tx.Exec(`UPDATE charges SET refunded = refunded + ? WHERE id = ?`, req.Amount, c.ID); err != nil {
		return Refund{}, fmt.Errorf("update charge: %w", err)
	}
	if err := tx.Emit("refund_created", "order:"+c.OrderID, map[string]any{
		"refund_id": id, "amount": req.Amount, "currency": req.Currency, "reason": req.Reason, "status": refundStatusSucceeded,
	}); err != nil {
		return Refund{}, err
	}
	return Refund{ID: id, ChargeID: c.ID, OrderID: c.OrderID, Amount: req.Amount, Currency: req.Currency,
		Reason: req.Reason, Status: refundStatusSucceeded}, nil
}

// ValidateRefund checks a refund request's fields (400 invalid_request or
// invalid_amount), for every backend.
func ValidateRefund(req RefundRequest) error {
	switch {
	case req.OrderID == "":
		return invalid("order_id is required")
	case req.Amount <= 0:
		return refuse(http.StatusBadRequest, CodeInvalidAmount, "amount must be a positive integer in minor units, got %d", req.Amount)
	case !validCurrency(req.Currency):
		return invalid("currency must be a three-letter ISO code such as USD, got %q", req.Currency)
	case len(req.Reason) > maxText:
		return invalid("reason is longer than %d bytes", maxText)
	}
	return nil
}

// StopBilling stops billing a subscription.
func (f *FakePayments) StopBilling(tx *Tx, req StopBillingRequest) (BillingStop, error) {
	if req.SubscriptionID == "" {
		return BillingStop{}, invalid("subscription_id is required")
	}
	var status string
	if err := tx.QueryRow(`SELECT status FROM billing WHERE subscription_id = ?`, req.SubscriptionID).Scan(&status); err != nil {
		return BillingStop{}, missing(err, "billing for subscription", req.SubscriptionID)
	}
	if status == billingStop {
		return BillingStop{}, refuse(http.StatusConflict, CodeBillingAlreadyStopped,
			"billing for subscription %s is already stopped", req.SubscriptionID)
	}
	if _, err := tx.Exec(`UPDATE billing SET status = ?, stopped_at = ? WHERE subscription_id = ?`,
		billingStop, fmtTime(tx.Now()), req.SubscriptionID); err != nil {
		return BillingStop{}, fmt.Errorf("stop billing: %w", err)
	}
	if err := tx.Emit("billing_stopped", "subscription:"+req.SubscriptionID,
		map[string]any{"subscription_id": req.SubscriptionID}); err != nil {
		return BillingStop{}, err
	}
	return BillingStop{SubscriptionID: req.SubscriptionID, Status: billingStop}, nil
}

// PaymentsSystem is charges, refunds and billing.
type PaymentsSystem struct {
	sys     *System
	backend PaymentsBackend
}

// NewPayments serves the payments system over sys with backend (nil: the
// SQLite fake).
func NewPayments(sys *System, backend PaymentsBackend) *PaymentsSystem {
	if backend == nil {
		backend = NewFakePayments(sys)
	}
	return &PaymentsSystem{sys: sys, backend: backend}
}

// System returns the underlying system.
func (p *PaymentsSystem) System() *System { return p.sys }

// Routes registers the payments routes.
func (p *PaymentsSystem) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /payments/charges/{order_id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return p.backend.Charge(r.Context(), r.PathValue("order_id")) })
	})
	mux.HandleFunc("POST /payments/refunds", handleWrite(p.sys, func(tx *Tx, r *http.Request, req *RefundRequest) (any, error) {
		req.IdempotencyKey = r.Header.Get("Idempotency-Key")
		return p.backend.CreateRefund(tx, *req)
	}))
	mux.HandleFunc("POST /payments/billing/stop", handleWrite(p.sys, func(tx *Tx, r *http.Request, req *StopBillingRequest) (any, error) {
		return p.backend.StopBilling(tx, *req)
	}))
	mux.HandleFunc("POST /payments/refunds/{refund_id}/reverse", handleWrite(p.sys, func(tx *Tx, r *http.Request, req *struct{}) (any, error) {
		return p.reverseRefund(tx, r.PathValue("refund_id"))
	}))
}

// Reconcile brings the event log up to date with the backend when the
// backend is a Reconciler (Stripe); it is a no-op for the SQLite fake.
func (p *PaymentsSystem) Reconcile(ctx context.Context) error {
	if rc, ok := p.backend.(Reconciler); ok {
		return rc.Reconcile(ctx)
	}
	return nil
}

var _ Reconciler = (*PaymentsSystem)(nil)

// Charge reads an order's charge.
func (p *PaymentsSystem) Charge(ctx context.Context, orderID string) (Charge, error) {
	return p.backend.Charge(ctx, orderID)
}

// CreateRefund refunds an order (a human through the payments API).
func (p *PaymentsSystem) CreateRefund(ctx context.Context, req RefundRequest) (Refund, error) {
	return do(ctx, p.sys, func(tx *Tx) (Refund, error) { return p.backend.CreateRefund(tx, req) })
}

// StopBilling stops a subscription's billing.
func (p *PaymentsSystem) StopBilling(ctx context.Context, subscriptionID string) (BillingStop, error) {
	return do(ctx, p.sys, func(tx *Tx) (BillingStop, error) {
		return p.backend.StopBilling(tx, StopBillingRequest{SubscriptionID: subscriptionID})
	})
}

// ReverseRefund undoes a refund (operator): the money goes back on the
// charge and refund_reversed is emitted.
func (p *PaymentsSystem) ReverseRefund(ctx context.Context, refundID string) (Refund, error) {
	return do(ctx, p.sys, func(tx *Tx) (Refund, error) { return p.reverseRefund(tx, refundID) })
}

func (p *PaymentsSystem) reverseRefund(tx *Tx, refundID string) (Refund, error) {
	var rf Refund
	err := tx.QueryRow(`SELECT id, charge_id, order_id, amount, currency, reason, status FROM refunds WHERE id = ?`, refundID).
		Scan(&rf.ID, &rf.ChargeID, &rf.OrderID, &rf.Amount, &rf.Currency, &rf.Reason, &rf.Status)
	if err != nil {
		return Refund{}, missing(err, "refund", refundID)
	}
	if rf.Status == refundStatusReversed {
		return Refund{}, refuse(http.StatusConflict, CodeRefundAlreadyReversed, "refund %s is already reversed", refundID)
	}
	if _, err := tx.Exec(`UPDATE refunds SET status = ?, reversed_at = ? WHERE id = ?`, refundStatusReversed, fmtTime(tx.Now()), refundID); err != nil {
		return Refund{}, fmt.Errorf("reverse refund: %w", err)
	}
	if _, err := tx.Exec(`UPDATE charges SET refunded = refunded - ? WHERE id = ?`, rf.Amount, rf.ChargeID); err != nil {
		return Refund{}, fmt.Errorf("reverse refund: %w", err)
	}
	if err := tx.Emit("refund_reversed", "order:"+rf.OrderID, map[string]any{
		"refund_id": rf.ID, "amount": rf.Amount, "currency": rf.Currency,
	}); err != nil {
		return Refund{}, err
	}
	rf.Status = refundStatusReversed
	return rf, nil
}

// SeedCharge is a seeded charge (one per paid or shipped order).
type SeedCharge struct {
	OrderID  string
	Amount   int64
	Currency string
}

// SeedBilling is a subscription's seeded billing state.
type SeedBilling struct {
	SubscriptionID string
	Active         bool
}

// Seed inserts charges (emitting charge_captured) and billing rows. A
// ChargeSeeder backend places each charge first and names it.
func (p *PaymentsSystem) Seed(ctx context.Context, s *Seeder, charges []SeedCharge, billing []SeedBilling) error {
	ids := make([]string, len(charges))
	for i, c := range charges {
		ids[i] = "ch_" + c.OrderID
		if cs, ok := p.backend.(ChargeSeeder); ok {
			id, err := cs.SeedCharge(ctx, c)
			if err != nil {
				return fmt.Errorf("seed %s: charge for order %s: %w", p.sys.name, c.OrderID, err)
			}
			ids[i] = id
		}
	}
	return p.sys.seed(ctx, func(tx *Tx) error {
		for i, c := range charges {
			at := s.Stamp()
			id := ids[i]
			if _, err := tx.Exec(`INSERT INTO charges(id, order_id, amount, refunded, currency, created_at) VALUES (?, ?, ?, 0, ?, ?)`,
				id, c.OrderID, c.Amount, c.Currency, fmtTime(at)); err != nil {
				return fmt.Errorf("charge %s: %w", id, err)
			}
			if err := tx.emitAt(at, "charge_captured", "order:"+c.OrderID,
				map[string]any{"charge_id": id, "amount": c.Amount, "currency": c.Currency}, nil); err != nil {
				return err
			}
		}
		for _, b := range billing {
			status, stopped := billingActive, any(nil)
			if !b.Active {
				status, stopped = billingStop, fmtTime(s.Stamp())
			}
			if _, err := tx.Exec(`INSERT INTO billing(subscription_id, status, stopped_at) VALUES (?, ?, ?)`,
				b.SubscriptionID, status, stopped); err != nil {
				return fmt.Errorf("billing %s: %w", b.SubscriptionID, err)
			}
		}
		return nil
	})
}
