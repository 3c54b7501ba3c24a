package stripefake

import (
	"net/url"
	"regexp"
	"strings"
)

var currencyPattern = regexp.MustCompile(`^[a-zA-Z]{3}$`)

func (f *Fake) createPI(form url.Values) (int, []byte, bool) {
	amount, has, aerr := positiveInt(form, "amount")
	switch {
	case aerr != nil:
		return aerr.status, aerr.body(), false
	case !has:
		e := invalidCode("parameter_missing", "amount", "Missing required param: amount.")
		return e.status, e.body(), false
	case form.Get("currency") == "":
		e := invalidCode("parameter_missing", "currency", "Missing required param: currency.")
		return e.status, e.body(), false
	case !currencyPattern.MatchString(form.Get("currency")):
		e := invalid("currency", "Invalid currency: %s.", form.Get("currency"))
		return e.status, e.body(), false
	}
	types := arrayParam(form, "payment_method_types")
	if len(types) == 0 {
		types = []string{"card"}
	}
	pi := &paymentIntent{ID: f.newID("pi"), Amount: amount, Currency: strings.ToLower(form.Get("currency")),
		Status: "requires_payment_method", Types: types, Metadata: metadata(form), Created: f.now()}
	if pm := form.Get("payment_method"); pm != "" {
		pi.PaymentMethod, pi.Status = pm, "requires_confirmation"
	}
	f.pis = append(f.pis, pi)
	if form.Get("confirm") == "true" {
		if pi.PaymentMethod == "" {
			e := invalidCode("payment_intent_unexpected_state", "",
				"You cannot confirm this PaymentIntent because it's missing a payment method.")
			return e.status, e.body(), true
		}
		f.succeed(pi)
	}
	s, b := ok(pi.json())
	return s, b, true
}

func (f *Fake) confirmPI(id, pm string) (int, []byte, bool) {
	pi := f.findPI(id)
	if pi == nil {
		e := notFound("intent", "payment_intent", id)
		return e.status, e.body(), false
	}
	if pm != "" {
		pi.PaymentMethod = pm
	}
	switch {
	case pi.Status == "succeeded":
		e := invalidCode("payment_intent_unexpected_state", "",
			"You cannot confirm this PaymentIntent because it has a status of succeeded.")
		return e.status, e.body(), true
	case pi.PaymentMethod == "":
		e := invalidCode("payment_intent_unexpected_state", "",
			"You cannot confirm this PaymentIntent because it's missing a payment method.")
		return e.status, e.body(), true
	}
	f.succeed(pi)
	s, b := ok(pi.json())
	return s, b, true
}

// succeed captures a confirmed PaymentIntent: every test card payment
// succeeds at once.
func (f *Fake) succeed(pi *paymentIntent) {
	ch := &charge{ID: f.newID("ch"), Amount: pi.Amount, Currency: pi.Currency, PaymentIntent: pi.ID,
		PaymentMethod: pi.PaymentMethod, Metadata: pi.Metadata, Created: f.now()}
	f.charges = append(f.charges, ch)
	pi.Status, pi.LatestCharge = "succeeded", ch.ID
}
