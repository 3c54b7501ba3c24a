package systems

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

const brokerSchema = `
CREATE TABLE products (
	id TEXT PRIMARY KEY,
	symbol TEXT NOT NULL,
	status TEXT NOT NULL,
	price INTEGER NOT NULL,
	currency TEXT NOT NULL
);
CREATE TABLE broker_orders (
	id TEXT PRIMARY KEY,
	product_id TEXT NOT NULL,
	account_id TEXT NOT NULL,
	side TEXT NOT NULL,
	quantity INTEGER NOT NULL,
	limit_price INTEGER NOT NULL,
	status TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE INDEX broker_orders_product ON broker_orders(product_id);
CREATE TABLE fills (
	id TEXT PRIMARY KEY,
	broker_order_id TEXT NOT NULL,
	product_id TEXT NOT NULL,
	account_id TEXT NOT NULL,
	side TEXT NOT NULL,
	quantity INTEGER NOT NULL,
	price INTEGER NOT NULL,
	notional INTEGER NOT NULL,
	status TEXT NOT NULL,
	bust_reason TEXT,
	created_at TEXT NOT NULL,
	busted_at TEXT
);
CREATE INDEX fills_product ON fills(product_id);
`

// Broker refusal codes.
const (
	CodeProductHalted     = "product_halted"
	CodeFillAlreadyBusted = "fill_already_busted"
)

// Broker values and bounds.
var (
	ProductStatuses = []string{"trading", "halted"}
	Sides           = []string{"buy", "sell"}
)

const (
	maxQuantity = 1_000_000
	maxPrice    = 1_000_000_000_00 // one billion in cents: notional stays far from int64 overflow
)

// Product is a tradable product.
type Product struct {
	ID       string `json:"id"`
	Symbol   string `json:"symbol"`
	Status   string `json:"status"`
	Price    int64  `json:"price"`
	Currency string `json:"currency"`
}

// TradeRequest is POST /broker/orders.
type TradeRequest struct {
	ProductID  string `json:"product_id"`
	AccountID  string `json:"account_id"`
	Side       string `json:"side"`
	Quantity   int64  `json:"quantity"`
	LimitPrice int64  `json:"limit_price"`
}

// BrokerOrder is an order placed with the broker, with its fill when the
// limit allowed one.
type BrokerOrder struct {
	ID         string `json:"id"`
	ProductID  string `json:"product_id"`
	AccountID  string `json:"account_id"`
	Side       string `json:"side"`
	Quantity   int64  `json:"quantity"`
	LimitPrice int64  `json:"limit_price"`
	Status     string `json:"status"`
	Fill       *Fill  `json:"fill"`
}

// Fill is an executed order.
type Fill struct {
	ID            string `json:"id"`
	BrokerOrderID string `json:"broker_order_id"`
	ProductID     string `json:"product_id"`
	AccountID     string `json:"account_id"`
	Side          string `json:"side"`
	Quantity      int64  `json:"quantity"`
	Price         int64  `json:"price"`
	Notional      int64  `json:"notional"`
	Status        string `json:"status"`
	BustReason    string `json:"bust_reason,omitempty"`
}

// BrokerSystem is products, orders and fills.
type BrokerSystem struct{ sys *System }

// NewBroker serves the broker system over sys.
func NewBroker(sys *System) *BrokerSystem { return &BrokerSystem{sys: sys} }

// System returns the underlying system.
func (b *BrokerSystem) System() *System { return b.sys }

const (
	productCols = `id, symbol, status, price, currency`
	fillCols    = `id, broker_order_id, product_id, account_id, side, quantity, price, notional, status, COALESCE(bust_reason, '')`
)

func scanProduct(row interface{ Scan(...any) error }) (Product, error) {
	var p Product
	err := row.Scan(&p.ID, &p.Symbol, &p.Status, &p.Price, &p.Currency)
	return p, err
}

// Routes registers the broker routes.
func (b *BrokerSystem) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /broker/products/{id}", func(w http.ResponseWriter, r *http.Request) {
		serveRead(w, r, func() (any, error) { return b.Product(r.Context(), r.PathValue("id")) })
	})
	mux.HandleFunc("POST /broker/orders", handleWrite(b.sys, func(tx *Tx, r *http.Request, req *TradeRequest) (any, error) {
		return b.placeOrder(tx, *req)
	}))
	type bustReq struct {
		Reason string `json:"reason"`
	}
	mux.HandleFunc("POST /broker/fills/{id}/bust", handleWrite(b.sys, func(tx *Tx, r *http.Request, req *bustReq) (any, error) {
		return b.bust(tx, r.PathValue("id"), req.Reason)
	}))
	type statusReq struct {
		Status string `json:"status"`
	}
	mux.HandleFunc("POST /broker/products/{id}/status", handleWrite(b.sys, func(tx *Tx, r *http.Request, req *statusReq) (any, error) {
		return b.setStatus(tx, r.PathValue("id"), req.Status)
	}))
	type priceReq struct {
		Price int64 `json:"price"`
	}
	mux.HandleFunc("POST /broker/products/{id}/price", handleWrite(b.sys, func(tx *Tx, r *http.Request, req *priceReq) (any, error) {
		return b.setPrice(tx, r.PathValue("id"), req.Price)
	}))
}

// Product reads a product.
func (b *BrokerSystem) Product(ctx context.Context, id string) (Product, error) {
	p, err := scanProduct(b.sys.db.QueryRowContext(ctx, `SELECT `+productCols+` FROM products WHERE id = ?`, id))
	if err != nil {
		return Product{}, missing(err, "product", id)
	}
	return p, nil
}

// PlaceOrder places an order; it fills at once at the product's price when
// the limit allows it.
func (b *BrokerSystem) PlaceOrder(ctx context.Context, req TradeRequest) (BrokerOrder, error) {
	return do(ctx, b.sys, func(tx *Tx) (BrokerOrder, error) { return b.placeOrder(tx, req) })
}

// BustFill cancels a fill after the fact (operator).
func (b *BrokerSystem) BustFill(ctx context.Context, fillID, reason string) (Fill, error) {
	return do(ctx, b.sys, func(tx *Tx) (Fill, error) { return b.bust(tx, fillID, reason) })
}

// SetProductStatus halts or resumes trading in a product (operator).
func (b *BrokerSystem) SetProductStatus(ctx context.Context, id, status string) (Product, error) {
	return do(ctx, b.sys, func(tx *Tx) (Product, error) { return b.setStatus(tx, id, status) })
}

// SetProductPrice moves a product's price (operator).
func (b *BrokerSystem) SetProductPrice(ctx context.Context, id string, price int64) (Product, error) {
	return do(ctx, b.sys, func(tx *Tx) (Product, error) { return b.setPrice(tx, id, price) })
}

func (b *BrokerSystem) loadProduct(tx *Tx, id string) (Product, error) {
	p, err := scanProduct(tx.QueryRow(`SELECT `+productCols+` FROM products WHERE id = ?`, id))
	if err != nil {
		return Product{}, missing(err, "product", id)
	}
	return p, nil
}

func (b *BrokerSystem) placeOrder(tx *Tx, req TradeRequest) (BrokerOrder, error) {
	switch {
	case req.ProductID == "":
		return BrokerOrder{}, invalid("product_id is required")
	case req.AccountID == "" || len(req.AccountID) > maxName:
		return BrokerOrder{}, invalid("account_id is required")
	case !slices.Contains(Sides, req.Side):
		return BrokerOrder{}, invalid("side must be buy or sell, got %q", req.Side)
	case req.Quantity <= 0 || req.Quantity > maxQuantity:
		return BrokerOrder{}, invalid("quantity must be an integer from 1 to %d, got %d", maxQuantity, req.Quantity)
	case req.LimitPrice <= 0 || req.LimitPrice > maxPrice:
		return BrokerOrder{}, invalid("limit_price must be a positive integer in minor units up to %d, got %d", int64(maxPrice), req.LimitPrice)
	}
	p, err := b.loadProduct(tx, req.ProductID)
	if err != nil {
		return BrokerOrder{}, err
	}
	if p.Status == "halted" {
		return BrokerOrder{}, refuse(http.StatusConflict, CodeProductHalted, "product %s is halted", p.ID)
	}
	oid, err := tx.NextID("bo_", "broker_orders")
	if err != nil {
		return BrokerOrder{}, err
	}
	fills := req.Side == "buy" && p.Price <= req.LimitPrice || req.Side == "sell" && p.Price >= req.LimitPrice
	o := BrokerOrder{ID: oid, ProductID: p.ID, AccountID: req.AccountID, Side: req.Side, Quantity: req.Quantity,
		LimitPrice: req.LimitPrice, Status: "open"}
	if fills {
		o.Status = "filled"
	}
	now := fmtTime(tx.Now())
	if _, err := tx.Exec(`INSERT INTO broker_orders(id, product_id, account_id, side, quantity, limit_price, status, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, o.ID, o.ProductID, o.AccountID, o.Side, o.Quantity, o.LimitPrice, o.Status, now); err != nil {
		return BrokerOrder{}, fmt.Errorf("place order: %w", err)
	}
	subject := "product:" + p.ID
	if err := tx.Emit("order_placed", subject, map[string]any{
		"broker_order_id": o.ID, "account_id": o.AccountID, "side": o.Side, "quantity": o.Quantity, "limit_price": o.LimitPrice,
	}); err != nil {
		return BrokerOrder{}, err
	}
	if !fills {
		return o, nil
	}
	fid, err := tx.NextID("f_", "fills")
	if err != nil {
		return BrokerOrder{}, err
	}
	f := Fill{ID: fid, BrokerOrderID: o.ID, ProductID: p.ID, AccountID: o.AccountID, Side: o.Side, Quantity: o.Quantity,
		Price: p.Price, Notional: o.Quantity * p.Price, Status: "filled"}
	if _, err := tx.Exec(`INSERT INTO fills(id, broker_order_id, product_id, account_id, side, quantity, price, notional, status, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, f.ID, f.BrokerOrderID, f.ProductID, f.AccountID, f.Side, f.Quantity, f.Price, f.Notional, f.Status, now); err != nil {
		return BrokerOrder{}, fmt.Errorf("fill order: %w", err)
	}
	if err := tx.Emit("order_filled", subject, map[string]any{
		"fill_id": f.ID, "broker_order_id": o.ID, "account_id": f.AccountID, "side": f.Side, "quantity": f.Quantity,
		"price": f.Price, "notional": f.Notional,
	}); err != nil {
		return BrokerOrder{}, err
	}
	o.Fill = &f
	return o, nil
}

func (b *BrokerSystem) bust(tx *Tx, fillID, reason string) (Fill, error) {
	reason = strings.TrimSpace(reason)
	if len(reason) > maxText {
		return Fill{}, invalid("reason is longer than %d bytes", maxText)
	}
	var f Fill
	err := tx.QueryRow(`SELECT `+fillCols+` FROM fills WHERE id = ?`, fillID).Scan(&f.ID, &f.BrokerOrderID, &f.ProductID,
		&f.AccountID, &f.Side, &f.Quantity, &f.Price, &f.Notional, &f.Status, &f.BustReason)
	if err != nil {
		return Fill{}, missing(err, "fill", fillID)
	}
	if f.Status == "busted" {
		return Fill{}, refuse(http.StatusConflict, CodeFillAlreadyBusted, "fill %s is already busted", fillID)
	}
	if _, err := tx.Exec(`UPDATE fills SET status = 'busted', bust_reason = ?, busted_at = ? WHERE id = ?`, reason, fmtTime(tx.Now()), f.ID); err != nil {
		return Fill{}, fmt.Errorf("bust fill: %w", err)
	}
	if err := tx.Emit("fill_busted", "product:"+f.ProductID, map[string]any{
		"fill_id": f.ID, "broker_order_id": f.BrokerOrderID, "reason": reason,
	}); err != nil {
		return Fill{}, err
	}
	f.Status, f.BustReason = "busted", reason
	return f, nil
}

func (b *BrokerSystem) setStatus(tx *Tx, id, status string) (Product, error) {
	if !slices.Contains(ProductStatuses, status) {
		return Product{}, invalid("status must be one of %s, got %q", strings.Join(ProductStatuses, ", "), status)
	}
	p, err := b.loadProduct(tx, id)
	if err != nil {
		return Product{}, err
	}
	if p.Status == status {
		return p, nil
	}
	if _, err := tx.Exec(`UPDATE products SET status = ? WHERE id = ?`, status, id); err != nil {
		return Product{}, fmt.Errorf("set product status: %w", err)
	}
	if err := tx.Emit("product_status_changed", "product:"+id, map[string]any{"status": status, "previous": p.Status}); err != nil {
		return Product{}, err
	}
	p.Status = status
	return p, nil
}

func (b *BrokerSystem) setPrice(tx *Tx, id string, price int64) (Product, error) {
	if price <= 0 || price > maxPrice {
		return Product{}, refuse(http.StatusBadRequest, CodeInvalidAmount, "price must be a positive integer in minor units up to %d, got %d", int64(maxPrice), price)
	}
	p, err := b.loadProduct(tx, id)
	if err != nil {
		return Product{}, err
	}
	if p.Price == price {
		return p, nil
	}
	if _, err := tx.Exec(`UPDATE products SET price = ? WHERE id = ?`, price, id); err != nil {
		return Product{}, fmt.Errorf("set product price: %w", err)
	}
	if err := tx.Emit("product_price_changed", "product:"+id, map[string]any{"price": price, "previous": p.Price, "currency": p.Currency}); err != nil {
		return Product{}, err
	}
	p.Price = price
	return p, nil
}

// Seed inserts products, emitting product_listed.
func (b *BrokerSystem) Seed(ctx context.Context, s *Seeder, products []Product) error {
	return b.sys.seed(ctx, func(tx *Tx) error {
		for _, p := range products {
			at := s.Stamp()
			if _, err := tx.Exec(`INSERT INTO products(`+productCols+`) VALUES (?, ?, ?, ?, ?)`, p.ID, p.Symbol, p.Status, p.Price, p.Currency); err != nil {
				return fmt.Errorf("product %s: %w", p.ID, err)
			}
			if err := tx.emitAt(at, "product_listed", "product:"+p.ID, map[string]any{
				"symbol": p.Symbol, "status": p.Status, "price": p.Price, "currency": p.Currency,
			}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}
