package stripefake

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

var refundReasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

// createRefund refunds a charge. executed is false for a request refused
// by parameter validation (not stored under its idempotency key) and true
// once Stripe acted on the charge, refusals of its state included.
func (f *Fake) createRefund(form url.Values) (status int, body []byte, executed bool) {
	invalidReq := func(e apiError) (int, []byte, bool) { return e.status, e.body(), false }
	refused := func(e apiError) (int, []byte, bool) { return e.status, e.body(), true }
	amount, hasAmount, aerr := positiveInt(form, "amount")
	if aerr != nil {
		return invalidReq(*aerr)
	}
	if reason := form.Get("reason"); reason != "" && !slices.Contains(refundReasons, reason) {
		return invalidReq(invalid("reason", "Invalid reason: must be one of %s", strings.Join(refundReasons, ", ")))
	}
	var ch *charge
	switch {
	case form.Get("charge") != "":
		if ch = f.findCharge(form.Get("charge")); ch == nil {
			return invalidReq(notFound("charge", "charge", form.Get("charge")))
		}
		if pi := form.Get("payment_intent"); pi != "" && pi != ch.PaymentIntent {
			return invalidReq(invalid("payment_intent", "The charge %s does not belong to PaymentIntent %s.", ch.ID, pi))
		}
	case form.Get("payment_intent") != "":
		pi := f.findPI(form.Get("payment_intent"))
		if pi == nil {
			return invalidReq(notFound("payment_intent", "payment_intent", form.Get("payment_intent")))
		}
		if pi.LatestCharge == "" {
			return refused(invalidCode("charge_not_refundable", "payment_intent",
				"This PaymentIntent (%s) does not have a successful charge to refund.", pi.ID))
		}
		ch = f.findCharge(pi.LatestCharge)
	default:
		return invalidReq(invalidCode("parameter_missing", "", "One of the following params should be provided for this request: payment_intent or charge."))
	}
	left := ch.Amount - ch.AmountRefunded
	if left <= 0 {
		return refused(invalidCode("charge_already_refunded", "", "Charge %s has already been refunded.", ch.ID))
	}
	if !hasAmount {
		amount = left
	}
	if amount > left {
		return refused(invalidCode("amount_too_large", "amount",
			"Refund amount (%s) is greater than unrefunded amount on charge (%s)", money(amount, ch.Currency), money(left, ch.Currency)))
	}
	ch.AmountRefunded += amount
	rf := &refund{ID: f.newID("re"), Amount: amount, Currency: ch.Currency, Charge: ch.ID, PaymentIntent: ch.PaymentIntent,
		Reason: form.Get("reason"), Status: "succeeded", Metadata: metadata(form), Created: f.now()}
	f.refunds = append(f.refunds, rf)
	status, body = ok(rf.json())
	return status, body, true
}

func money(minor int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", minor/100, minor%100, strings.ToUpper(currency))
}
