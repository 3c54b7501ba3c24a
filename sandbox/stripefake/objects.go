package stripefake

// Objects. Their json methods give Stripe's representation.

type paymentIntent struct {
	ID            string
	Amount        int64
	Currency      string
	Status        string
	PaymentMethod string
	Types         []string
	LatestCharge  string
	Metadata      map[string]string
	Created       int64
}

func (p *paymentIntent) json() map[string]any {
	received := int64(0)
	if p.Status == "succeeded" {
		received = p.Amount
	}
	return map[string]any{
		"id": p.ID, "object": "payment_intent", "amount": p.Amount, "amount_received": received,
		"currency": p.Currency, "status": p.Status, "payment_method": nullable(p.PaymentMethod),
		"payment_method_types": p.Types, "latest_charge": nullable(p.LatestCharge), "metadata": p.Metadata,
		"created": p.Created, "livemode": false, "capture_method": "automatic", "confirmation_method": "automatic",
	}
}

type charge struct {
	ID             string
	Amount         int64
	AmountRefunded int64
	Currency       string
	PaymentIntent  string
	PaymentMethod  string
	Disputed       bool
	Metadata       map[string]string
	Created        int64
}

func (c *charge) json() map[string]any {
	return map[string]any{
		"id": c.ID, "object": "charge", "amount": c.Amount, "amount_captured": c.Amount,
		"amount_refunded": c.AmountRefunded, "refunded": c.AmountRefunded >= c.Amount, "currency": c.Currency,
		"payment_intent": c.PaymentIntent, "payment_method": c.PaymentMethod, "status": "succeeded", "paid": true,
		"captured": true, "disputed": c.Disputed, "metadata": c.Metadata, "created": c.Created, "livemode": false,
	}
}

type refund struct {
	ID            string
	Amount        int64
	Currency      string
	Charge        string
	PaymentIntent string
	Reason        string
	Status        string
	Metadata      map[string]string
	Created       int64
}

func (r *refund) json() map[string]any {
	return map[string]any{
		"id": r.ID, "object": "refund", "amount": r.Amount, "currency": r.Currency, "charge": r.Charge,
		"payment_intent": r.PaymentIntent, "reason": nullable(r.Reason), "status": r.Status,
		"metadata": r.Metadata, "created": r.Created,
	}
}

type payout struct {
	ID       string
	Amount   int64
	Currency string
	Status   string
	Created  int64
}

func (p *payout) json() map[string]any {
	return map[string]any{
		"id": p.ID, "object": "payout", "amount": p.Amount, "currency": p.Currency, "status": p.Status,
		"arrival_date": p.Created + 2*86400, "method": "standard", "type": "bank_account", "created": p.Created,
		"livemode": false, "metadata": map[string]string{},
	}
}

type dispute struct {
	ID            string
	Amount        int64
	Currency      string
	Charge        string
	PaymentIntent string
	Reason        string
	Status        string
	Created       int64
}

func (d *dispute) json() map[string]any {
	return map[string]any{
		"id": d.ID, "object": "dispute", "amount": d.Amount, "currency": d.Currency, "charge": d.Charge,
		"payment_intent": d.PaymentIntent, "reason": d.Reason, "status": d.Status, "created": d.Created,
		"livemode": false, "metadata": map[string]string{},
	}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (f *Fake) findPI(id string) *paymentIntent {
	for _, p := range f.pis {
		if p.ID == id {
			return p
		}
	}
	return nil
}

func (f *Fake) findCharge(id string) *charge {
	for _, c := range f.charges {
		if c.ID == id {
			return c
		}
	}
	return nil
}
