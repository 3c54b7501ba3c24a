package stripefake

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// Lists.

type item struct {
	id      string
	created int64
	obj     map[string]any
}

func createdMatches(form url.Values, created int64) (bool, *apiError) {
	for _, op := range []string{"gt", "gte", "lt", "lte"} {
		v, ok := form["created["+op+"]"]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			e := invalid("created["+op+"]", "Invalid integer: %s", v[0])
			return false, &e
		}
		switch {
		case op == "gt" && created <= n, op == "gte" && created < n, op == "lt" && created >= n, op == "lte" && created > n:
			return false, nil
		}
	}
	if v, ok := form["created"]; ok {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			e := invalid("created", "Invalid integer: %s", v[0])
			return false, &e
		}
		return created == n, nil
	}
	return true, nil
}

func (f *Fake) refundItems(form url.Values) []item {
	var out []item
	for _, r := range f.refunds {
		if (form.Get("payment_intent") == "" || r.PaymentIntent == form.Get("payment_intent")) &&
			(form.Get("charge") == "" || r.Charge == form.Get("charge")) {
			out = append(out, item{r.ID, r.Created, r.json()})
		}
	}
	return out
}

func (f *Fake) chargeItems(form url.Values) []item {
	var out []item
	for _, c := range f.charges {
		if form.Get("payment_intent") == "" || c.PaymentIntent == form.Get("payment_intent") {
			out = append(out, item{c.ID, c.Created, c.json()})
		}
	}
	return out
}

func (f *Fake) payoutItems(form url.Values) []item {
	var out []item
	for _, p := range f.payouts {
		if form.Get("status") == "" || p.Status == form.Get("status") {
			out = append(out, item{p.ID, p.Created, p.json()})
		}
	}
	return out
}

func (f *Fake) disputeItems(form url.Values) []item {
	var out []item
	for _, d := range f.disputes {
		if (form.Get("payment_intent") == "" || d.PaymentIntent == form.Get("payment_intent")) &&
			(form.Get("charge") == "" || d.Charge == form.Get("charge")) {
			out = append(out, item{d.ID, d.Created, d.json()})
		}
	}
	return out
}

// list answers a list endpoint: items (in creation order) filtered by
// created, newest first, one page of limit from starting_after or
// ending_before.
func (f *Fake) list(r *http.Request, path string, items []item) (int, []byte) {
	form := r.Form
	limit := 10
	if v, ok := form["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > 100 {
			return fail(invalid("limit", "This value must be between 1 and 100 (it currently is '%s').", v[0]))
		}
		limit = n
	}
	var sel []item
	for i := len(items) - 1; i >= 0; i-- { // newest first
		match, aerr := createdMatches(form, items[i].created)
		if aerr != nil {
			return fail(*aerr)
		}
		if match {
			sel = append(sel, items[i])
		}
	}
	after, before := form.Get("starting_after"), form.Get("ending_before")
	if after != "" && before != "" {
		return fail(invalid("ending_before", "You may only specify one of these parameters: ending_before, starting_after."))
	}
	var page []item
	hasMore := false
	switch {
	case before != "":
		at := slices.IndexFunc(sel, func(it item) bool { return it.id == before })
		if at < 0 {
			return fail(notFound("ending_before", "object", before))
		}
		start := max(0, at-limit)
		page, hasMore = sel[start:at], start > 0
	default:
		start := 0
		if after != "" {
			at := slices.IndexFunc(sel, func(it item) bool { return it.id == after })
			if at < 0 {
				return fail(notFound("starting_after", "object", after))
			}
			start = at + 1
		}
		end := min(len(sel), start+limit)
		page, hasMore = sel[start:end], end < len(sel)
	}
	data := make([]map[string]any, 0, len(page))
	for _, it := range page {
		data = append(data, it.obj)
	}
	return ok(map[string]any{"object": "list", "url": path, "has_more": hasMore, "data": data})
}
