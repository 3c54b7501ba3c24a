package systems

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

const ordersSchema = `
CREATE TABLE orders (
	id TEXT PRIMARY KEY,
	customer_id TEXT NOT NULL,
	status TEXT NOT NULL,
	total INTEGER NOT NULL,
	currency TEXT NOT NULL,
	address TEXT NOT NULL,
	discount_percent INTEGER NOT NULL DEFAULT 0,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE INDEX orders_customer ON orders(customer_id);
CREATE TABLE discounts (
	id TEXT PRIMARY KEY,
	order_id TEXT NOT NULL,
	percent INTEGER NOT NULL,
	created_at TEXT NOT NULL
);
`

// OrderStatuses are the statuses an order may have.
var OrderStatuses = []string{"pending", "paid", "shipped", "delivered", "refunded", "cancelled"}

// Order is an order in the orders system.
type Order struct {
	ID              string `json:"id"`
	CustomerID      string `json:"customer_id"`
	Status          string `json:"status"`
	Total           int64  `json:"total"`
	Currency        string `json:"currency"`
	Address         string `json:"address"`
	DiscountPercent int64  `json:"discount_percent"`
}

// Discount is a discount applied to an order.
type Discount struct {
	ID      string `json:"id"`
	OrderID string `json:"order_id"`
	Percent int64  `json:"percent"`
}

// OrdersSystem is orders, addresses and discounts.
type OrdersSystem struct{ sys *System }

// NewOrders serves the orders system over sys.
func NewOrders(sys *System) *OrdersSystem { return &OrdersSystem{sys: sys} }

// System returns the underlying system.
func (o *OrdersSystem) System() *System { return o.sys }

const orderCols = `id, customer_id, status, total, currency, address, discount_percent`

func scanOrder(row interface{ Scan(...any) error }) (Order, error) {
	var o Order
	err := row.Scan(&o.ID, &o.CustomerID, &o.Status, &o.Total, &o.Currency, &o.Address, &o.DiscountPercent)
	return o, err
}

// Routes registers the orders routes.
func (o *OrdersSystem) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /orders/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return o.Order(r.Context(), r.PathValue("id")) })
	})
	mux.HandleFunc("GET /orders/orders", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) {
			list, err := o.List(r.Context(), r.URL.Query().Get("customer_id"))
			return map[string]any{"orders": list}, err
		})
	})
	type statusReq struct {
		Status string `json:"status"`
	}
	mux.HandleFunc("POST /orders/orders/{id}/status", handleWrite(o.sys, func(tx *Tx, r *http.Request, req *statusReq) (any, error) {
		return o.setStatus(tx, r.PathValue("id"), req.Status)
	}))
	type addressReq struct {
		Address string `json:"address"`
	}
	mux.HandleFunc("POST /orders/orders/{id}/address", handleWrite(o.sys, func(tx *Tx, r *http.Request, req *addressReq) (any, error) {
		return o.changeAddress(tx, r.PathValue("id"), req.Address)
	}))
	type discountReq struct {
		Percent int64 `json:"percent"`
	}
	mux.HandleFunc("POST /orders/orders/{id}/discounts", handleWrite(o.sys, func(tx *Tx, r *http.Request, req *discountReq) (any, error) {
		return o.applyDiscount(tx, r.PathValue("id"), req.Percent)
	}))
}

// Order reads one order.
func (o *OrdersSystem) Order(ctx context.Context, id string) (Order, error) {
	ord, err := scanOrder(o.sys.db.QueryRowContext(ctx, `SELECT `+orderCols+` FROM orders WHERE id = ?`, id))
	if err != nil {
		return Order{}, missing(err, "order", id)
	}
	return ord, nil
}

// List reads the orders of a customer (all orders when customerID is empty),
// by id.
func (o *OrdersSystem) List(ctx context.Context, customerID string) ([]Order, error) {
	var rows *sql.Rows
	var err error
	if customerID == "" {
		rows, err = o.sys.db.QueryContext(ctx, `SELECT `+orderCols+` FROM orders ORDER BY id`)
	} else {
		rows, err = o.sys.db.QueryContext(ctx, `SELECT `+orderCols+` FROM orders WHERE customer_id = ? ORDER BY id`, customerID)
	}
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	defer rows.Close()
	list := []Order{}
	for rows.Next() {
		ord, err := scanOrder(rows)
		if err != nil {
			return nil, fmt.Errorf("list orders: %w", err)
		}
		list = append(list, ord)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	return list, nil
}

// SetStatus changes an order's status (a human or the agent). Setting the
// status it already has changes nothing and emits nothing.
func (o *OrdersSystem) SetStatus(ctx context.Context, id, status string) (Order, error) {
	return do(ctx, o.sys, func(tx *Tx) (Order, error) { return o.setStatus(tx, id, status) })
}

// ChangeAddress changes an order's shipping address.
func (o *OrdersSystem) ChangeAddress(ctx context.Context, id, address string) (Order, error) {
	return do(ctx, o.sys, func(tx *Tx) (Order, error) { return o.changeAddress(tx, id, address) })
}

// ApplyDiscount applies a percentage discount to an order.
func (o *OrdersSystem) ApplyDiscount(ctx context.Context, id string, percent int64) (Discount, error) {
	return do(ctx, o.sys, func(tx *Tx) (Discount, error) { return o.applyDiscount(tx, id, percent) })
}

func (o *OrdersSystem) load(tx *Tx, id string) (Order, error) {
	ord, err := scanOrder(tx.QueryRow(`SELECT `+orderCols+` FROM orders WHERE id = ?`, id))
	if err != nil {
		return Order{}, missing(err, "order", id)
	}
	return ord, nil
}

func (o *OrdersSystem) setStatus(tx *Tx, id, status string) (Order, error) {
	if !slices.Contains(OrderStatuses, status) {
		return Order{}, invalid("status must be one of %s, got %q", strings.Join(OrderStatuses, ", "), status)
	}
	ord, err := o.load(tx, id)
	if err != nil {
		return Order{}, err
	}
	if ord.Status == status {
		return ord, nil
	}
	if _, err := tx.Exec(`UPDATE orders SET status = ?, updated_at = ? WHERE id = ?`, status, fmtTime(tx.Now()), id); err != nil {
		return Order{}, fmt.Errorf("set order status: %w", err)
	}
	if err := tx.Emit("order_status_changed", "order:"+id, map[string]any{"status": status, "previous": ord.Status}); err != nil {
		return Order{}, err
	}
	ord.Status = status
	return ord, nil
}

func (o *OrdersSystem) changeAddress(tx *Tx, id, address string) (Order, error) {
	address = strings.TrimSpace(address)
	switch {
	case address == "":
		return Order{}, invalid("address is required")
	case len(address) > maxText:
		return Order{}, invalid("address is longer than %d bytes", maxText)
	}
	ord, err := o.load(tx, id)
	if err != nil {
		return Order{}, err
	}
	if ord.Address == address {
		return ord, nil
	}
	if _, err := tx.Exec(`UPDATE orders SET address = ?, updated_at = ? WHERE id = ?`, address, fmtTime(tx.Now()), id); err != nil {
		return Order{}, fmt.Errorf("change address: %w", err)
	}
	if err := tx.Emit("address_changed", "order:"+id, map[string]any{"address": address, "previous": ord.Address}); err != nil {
		return Order{}, err
	}
	ord.Address = address
	return ord, nil
}

func (o *OrdersSystem) applyDiscount(tx *Tx, id string, percent int64) (Discount, error) {
	if percent < 1 || percent > 100 {
		return Discount{}, invalid("percent must be an integer from 1 to 100, got %d", percent)
	}
	if _, err := o.load(tx, id); err != nil {
		return Discount{}, err
	}
	did, err := tx.NextID("d_", "discounts")
	if err != nil {
		return Discount{}, err
	}
	now := fmtTime(tx.Now())
	if _, err := tx.Exec(`INSERT INTO discounts(id, order_id, percent, created_at) VALUES (?, ?, ?, ?)`, did, id, percent, now); err != nil {
		return Discount{}, fmt.Errorf("apply discount: %w", err)
	}
	if _, err := tx.Exec(`UPDATE orders SET discount_percent = ?, updated_at = ? WHERE id = ?`, percent, now, id); err != nil {
		return Discount{}, fmt.Errorf("apply discount: %w", err)
	}
	if err := tx.Emit("discount_applied", "order:"+id, map[string]any{"discount_id": did, "percent": percent}); err != nil {
		return Discount{}, err
	}
	return Discount{ID: did, OrderID: id, Percent: percent}, nil
}

// Seed inserts orders, emitting order_created linked to the customer.
func (o *OrdersSystem) Seed(ctx context.Context, s *Seeder, orders []Order) error {
	return o.sys.seed(ctx, func(tx *Tx) error {
		for _, ord := range orders {
			at := s.Stamp()
			if _, err := tx.Exec(`INSERT INTO orders(`+orderCols+`, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				ord.ID, ord.CustomerID, ord.Status, ord.Total, ord.Currency, ord.Address, ord.DiscountPercent, fmtTime(at), fmtTime(at)); err != nil {
				return fmt.Errorf("order %s: %w", ord.ID, err)
			}
			if err := tx.emitAt(at, "order_created", "order:"+ord.ID, map[string]any{
				"customer_id": ord.CustomerID, "status": ord.Status, "total": ord.Total, "currency": ord.Currency, "address": ord.Address,
			}, []string{"customer:" + ord.CustomerID}); err != nil {
				return err
			}
		}
		return nil
	})
}
