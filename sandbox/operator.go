package sandbox

import (
	"context"

	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// Operator acts in an enterprise outside the agent: the concurrent human of
// a "before" injection, the reversal of an "after settlement" injection, or
// a scenario's setup. Its writes go through the same code as the HTTP
// routes: they advance the clock and emit events like any write, and refuse
// what the routes refuse (an *systems.APIError).
type Operator struct{ e *Enterprise }

// Refund refunds an order through the payments API, as a human would.
func (o *Operator) Refund(ctx context.Context, orderID string, amount int64, currency, reason string) (systems.Refund, error) {
	return o.e.payments.CreateRefund(ctx, systems.RefundRequest{OrderID: orderID, Amount: amount, Currency: currency, Reason: reason})
}

// ReverseRefund reverses a refund (refund_reversed).
func (o *Operator) ReverseRefund(ctx context.Context, refundID string) (systems.Refund, error) {
	return o.e.payments.ReverseRefund(ctx, refundID)
}

// StopBilling stops a subscription's billing.
func (o *Operator) StopBilling(ctx context.Context, subscriptionID string) (systems.BillingStop, error) {
	return o.e.payments.StopBilling(ctx, subscriptionID)
}

// SetOrderStatus changes an order's status.
func (o *Operator) SetOrderStatus(ctx context.Context, orderID, status string) (systems.Order, error) {
	return o.e.orders.SetStatus(ctx, orderID, status)
}

// ChangeAddress changes an order's shipping address.
func (o *Operator) ChangeAddress(ctx context.Context, orderID, address string) (systems.Order, error) {
	return o.e.orders.ChangeAddress(ctx, orderID, address)
}

// ApplyDiscount applies a discount to an order.
func (o *Operator) ApplyDiscount(ctx context.Context, orderID string, percent int64) (systems.Discount, error) {
	return o.e.orders.ApplyDiscount(ctx, orderID, percent)
}

// CancelSubscription cancels a subscription in the CRM.
func (o *Operator) CancelSubscription(ctx context.Context, subscriptionID, reason string) (systems.Subscription, error) {
	return o.e.crm.CancelSubscription(ctx, subscriptionID, reason)
}

// SetCustomerStatus freezes ("frozen") or unfreezes ("active") a customer.
func (o *Operator) SetCustomerStatus(ctx context.Context, customerID, status string) (systems.Customer, error) {
	return o.e.crm.SetCustomerStatus(ctx, customerID, status)
}

// AddNote adds a note to a ticket; author defaults to "human".
func (o *Operator) AddNote(ctx context.Context, ticketID, body, author string) (systems.Note, error) {
	if author == "" {
		author = "human"
	}
	return o.e.tickets.AddNote(ctx, ticketID, systems.NoteRequest{Body: body, Author: author})
}

// CloseTicket closes a ticket.
func (o *Operator) CloseTicket(ctx context.Context, ticketID, resolution string) (systems.Ticket, error) {
	return o.e.tickets.Close(ctx, ticketID, resolution)
}

// SendPayout sends a payout to an account.
func (o *Operator) SendPayout(ctx context.Context, accountID string, amount int64, currency string) (systems.Payout, error) {
	return o.e.ledger.SendPayout(ctx, systems.PayoutRequest{AccountID: accountID, Amount: amount, Currency: currency})
}

// ReturnPayout records a returned payout (payout_returned).
func (o *Operator) ReturnPayout(ctx context.Context, payoutID, reason string) (systems.Payout, error) {
	return o.e.ledger.ReturnPayout(ctx, payoutID, reason)
}

// SetAccountStatus freezes ("frozen") or unfreezes ("active") an account.
func (o *Operator) SetAccountStatus(ctx context.Context, accountID, status string) (systems.Account, error) {
	return o.e.ledger.SetAccountStatus(ctx, accountID, status)
}

// Deploy deploys a version of a service.
func (o *Operator) Deploy(ctx context.Context, serviceID, version, environment string) (systems.Deployment, error) {
	return o.e.platform.Deploy(ctx, serviceID, systems.DeployRequest{Version: version, Environment: environment})
}

// RollBack rolls a deployment back (rolled_back).
func (o *Operator) RollBack(ctx context.Context, deploymentID string) (systems.Deployment, error) {
	return o.e.platform.RollBack(ctx, deploymentID)
}

// SetServiceStatus marks a service "healthy" or "degraded".
func (o *Operator) SetServiceStatus(ctx context.Context, serviceID, status string) (systems.Service, error) {
	return o.e.platform.SetServiceStatus(ctx, serviceID, status)
}

// FailNextHealthCheck makes the next deploy of a service report unhealthy
// (or not). Configuration only: no event, no clock tick.
func (o *Operator) FailNextHealthCheck(ctx context.Context, serviceID string, fail bool) (systems.Service, error) {
	return o.e.platform.FailNextHealthCheck(ctx, serviceID, fail)
}

// PlaceOrder places a broker order.
func (o *Operator) PlaceOrder(ctx context.Context, req systems.TradeRequest) (systems.BrokerOrder, error) {
	return o.e.broker.PlaceOrder(ctx, req)
}

// BustFill busts a fill (fill_busted).
func (o *Operator) BustFill(ctx context.Context, fillID, reason string) (systems.Fill, error) {
	return o.e.broker.BustFill(ctx, fillID, reason)
}

// SetProductStatus halts ("halted") or resumes ("trading") a product.
func (o *Operator) SetProductStatus(ctx context.Context, productID, status string) (systems.Product, error) {
	return o.e.broker.SetProductStatus(ctx, productID, status)
}

// SetProductPrice moves a product's price (product_price_changed).
func (o *Operator) SetProductPrice(ctx context.Context, productID string, price int64) (systems.Product, error) {
	return o.e.broker.SetProductPrice(ctx, productID, price)
}
