package systems

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

const crmSchema = `
CREATE TABLE customers (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	email TEXT NOT NULL,
	tier TEXT NOT NULL,
	status TEXT NOT NULL
);
CREATE TABLE subscriptions (
	id TEXT PRIMARY KEY,
	customer_id TEXT NOT NULL,
	plan TEXT NOT NULL,
	status TEXT NOT NULL,
	price INTEGER NOT NULL,
	currency TEXT NOT NULL,
	cancel_reason TEXT,
	cancelled_at TEXT
);
`

// CRM values.
var (
	CustomerTiers       = []string{"gold", "silver", "bronze"}
	CustomerStatuses    = []string{"active", "frozen"}
	SubscriptionStatues = []string{"active", "cancelled"}
)

// CodeAlreadyCancelled refuses cancelling a cancelled subscription.
const CodeAlreadyCancelled = "already_cancelled"

// Customer is a CRM customer.
type Customer struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Email  string `json:"email"`
	Tier   string `json:"tier"`
	Status string `json:"status"`
}

// Subscription is a customer's subscription.
type Subscription struct {
	ID         string `json:"id"`
	CustomerID string `json:"customer_id"`
	Plan       string `json:"plan"`
	Status     string `json:"status"`
	Price      int64  `json:"price"`
	Currency   string `json:"currency"`
}

// CRMSystem is customers and subscriptions.
type CRMSystem struct{ sys *System }

// NewCRM serves the crm system over sys.
func NewCRM(sys *System) *CRMSystem { return &CRMSystem{sys: sys} }

// System returns the underlying system.
func (c *CRMSystem) System() *System { return c.sys }

const (
	customerCols     = `id, name, email, tier, status`
	subscriptionCols = `id, customer_id, plan, status, price, currency`
)

func scanCustomer(row interface{ Scan(...any) error }) (Customer, error) {
	var c Customer
	err := row.Scan(&c.ID, &c.Name, &c.Email, &c.Tier, &c.Status)
	return c, err
}

func scanSubscription(row interface{ Scan(...any) error }) (Subscription, error) {
	var s Subscription
	err := row.Scan(&s.ID, &s.CustomerID, &s.Plan, &s.Status, &s.Price, &s.Currency)
	return s, err
}

// Routes registers the crm routes.
func (c *CRMSystem) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /crm/customers/{id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return c.Customer(r.Context(), r.PathValue("id")) })
	})
	mux.HandleFunc("GET /crm/subscriptions/{id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return c.Subscription(r.Context(), r.PathValue("id")) })
	})
	type cancelReq struct {
		Reason string `json:"reason,omitempty"`
	}
	mux.HandleFunc("POST /crm/subscriptions/{id}/cancel", handleWrite(c.sys, func(tx *Tx, r *http.Request, req *cancelReq) (any, error) {
		return c.cancel(tx, r.PathValue("id"), req.Reason)
	}))
	type statusReq struct {
		Status string `json:"status"`
	}
	mux.HandleFunc("POST /crm/customers/{id}/status", handleWrite(c.sys, func(tx *Tx, r *http.Request, req *statusReq) (any, error) {
		return c.setCustomerStatus(tx, r.PathValue("id"), req.Status)
	}))
}

// Customer reads a customer.
func (c *CRMSystem) Customer(ctx context.Context, id string) (Customer, error) {
	cu, err := scanCustomer(c.sys.db.QueryRowContext(ctx, `SELECT `+customerCols+` FROM customers WHERE id = ?`, id))
	if err != nil {
		return Customer{}, missing(err, "customer", id)
	}
	return cu, nil
}

// Subscription reads a subscription.
func (c *CRMSystem) Subscription(ctx context.Context, id string) (Subscription, error) {
	s, err := scanSubscription(c.sys.db.QueryRowContext(ctx, `SELECT `+subscriptionCols+` FROM subscriptions WHERE id = ?`, id))
	if err != nil {
		return Subscription{}, missing(err, "subscription", id)
	}
	return s, nil
}

// CancelSubscription cancels a subscription.
func (c *CRMSystem) CancelSubscription(ctx context.Context, id, reason string) (Subscription, error) {
	return do(ctx, c.sys, func(tx *Tx) (Subscription, error) { return c.cancel(tx, id, reason) })
}

// SetCustomerStatus freezes or unfreezes a customer (operator).
func (c *CRMSystem) SetCustomerStatus(ctx context.Context, id, status string) (Customer, error) {
	return do(ctx, c.sys, func(tx *Tx) (Customer, error) { return c.setCustomerStatus(tx, id, status) })
}

func (c *CRMSystem) cancel(tx *Tx, id, reason string) (Subscription, error) {
	if len(reason) > maxText {
		return Subscription{}, invalid("reason is longer than %d bytes", maxText)
	}
	s, err := scanSubscription(tx.QueryRow(`SELECT `+subscriptionCols+` FROM subscriptions WHERE id = ?`, id))
	if err != nil {
		return Subscription{}, missing(err, "subscription", id)
	}
	if s.Status == "cancelled" {
		return Subscription{}, refuse(http.StatusConflict, CodeAlreadyCancelled, "subscription %s is already cancelled", id)
	}
	if _, err := tx.Exec(`UPDATE subscriptions SET status = 'cancelled', cancel_reason = ?, cancelled_at = ? WHERE id = ?`,
		reason, fmtTime(tx.Now()), id); err != nil {
		return Subscription{}, fmt.Errorf("cancel subscription: %w", err)
	}
	if err := tx.Emit("subscription_status_changed", "subscription:"+id,
		map[string]any{"status": "cancelled", "previous": s.Status}, "customer:"+s.CustomerID); err != nil {
		return Subscription{}, err
	}
	s.Status = "cancelled"
	return s, nil
}

func (c *CRMSystem) setCustomerStatus(tx *Tx, id, status string) (Customer, error) {
	if !slices.Contains(CustomerStatuses, status) {
		return Customer{}, invalid("status must be one of %s, got %q", strings.Join(CustomerStatuses, ", "), status)
	}
	cu, err := scanCustomer(tx.QueryRow(`SELECT `+customerCols+` FROM customers WHERE id = ?`, id))
	if err != nil {
		return Customer{}, missing(err, "customer", id)
	}
	if cu.Status == status {
		return cu, nil
	}
	if _, err := tx.Exec(`UPDATE customers SET status = ? WHERE id = ?`, status, id); err != nil {
		return Customer{}, fmt.Errorf("set customer status: %w", err)
	}
	if err := tx.Emit("customer_status_changed", "customer:"+id, map[string]any{"status": status, "previous": cu.Status}); err != nil {
		return Customer{}, err
	}
	cu.Status = status
	return cu, nil
}

// Seed inserts customers and subscriptions, emitting customer_created and
// subscription_created (linked to the customer).
func (c *CRMSystem) Seed(ctx context.Context, s *Seeder, customers []Customer, subs []Subscription) error {
	return c.sys.seed(ctx, func(tx *Tx) error {
		for _, cu := range customers {
			at := s.Stamp()
			if _, err := tx.Exec(`INSERT INTO customers(`+customerCols+`) VALUES (?, ?, ?, ?, ?)`,
				cu.ID, cu.Name, cu.Email, cu.Tier, cu.Status); err != nil {
				return fmt.Errorf("customer %s: %w", cu.ID, err)
			}
			if err := tx.emitAt(at, "customer_created", "customer:"+cu.ID, map[string]any{
				"name": cu.Name, "email": cu.Email, "tier": cu.Tier, "status": cu.Status,
			}, nil); err != nil {
				return err
			}
		}
		for _, sub := range subs {
			at := s.Stamp()
			var cancelledAt any
			if sub.Status == "cancelled" {
				cancelledAt = fmtTime(at)
			}
			if _, err := tx.Exec(`INSERT INTO subscriptions(`+subscriptionCols+`, cancelled_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				sub.ID, sub.CustomerID, sub.Plan, sub.Status, sub.Price, sub.Currency, cancelledAt); err != nil {
				return fmt.Errorf("subscription %s: %w", sub.ID, err)
			}
			if err := tx.emitAt(at, "subscription_created", "subscription:"+sub.ID, map[string]any{
				"customer_id": sub.CustomerID, "plan": sub.Plan, "status": sub.Status, "price": sub.Price, "currency": sub.Currency,
			}, []string{"customer:" + sub.CustomerID}); err != nil {
				return err
			}
		}
		return nil
	})
}
