package chaos

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
)

var phantomSeq atomic.Int64

// PhantomBody builds a plausible 200 body for a call that was never
// forwarded: the shape of the sandbox system's real answer for that route,
// filled from the request body and path, with a made-up id. Unknown routes
// get the request body echoed with an "id".
func PhantomBody(method, path string, reqBody []byte) []byte {
	in := map[string]any{}
	if len(reqBody) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(reqBody)))
		dec.UseNumber()
		if err := dec.Decode(&in); err != nil || in == nil {
			in = map[string]any{}
		}
	}
	n := phantomSeq.Add(1)
	id := func(prefix string) string { return fmt.Sprintf("%s_ph%d", prefix, n) }
	segs := splitPath(path)
	seg := func(i int) string {
		if i < len(segs) {
			return segs[i]
		}
		return ""
	}
	out := map[string]any{}
	for k, v := range in {
		out[k] = v
	}
	route := method + " /" + strings.Join(segs, "/")
	switch {
	case method == "POST" && route == "POST /payments/refunds":
		out["refund_id"] = id("re")
		out["status"] = "succeeded"
	case method == "POST" && route == "POST /payments/billing/stop":
		out["status"] = "stopped"
	case method == "POST" && len(segs) == 4 && seg(0) == "orders" && seg(1) == "orders":
		out["id"] = seg(2)
		if seg(3) == "discounts" {
			out["discount_id"] = id("d")
			out["order_id"] = seg(2)
		}
	case method == "POST" && len(segs) == 4 && seg(0) == "crm" && seg(3) == "cancel":
		out["id"] = seg(2)
		out["status"] = "cancelled"
	case method == "POST" && len(segs) == 4 && seg(0) == "tickets" && seg(3) == "notes":
		out["note_id"] = id("n")
		out["ticket_id"] = seg(2)
	case method == "POST" && len(segs) == 4 && seg(0) == "tickets" && seg(3) == "close":
		out["id"] = seg(2)
		out["status"] = "closed"
	case method == "POST" && route == "POST /ledger/payouts":
		out["payout_id"] = id("po")
		out["status"] = "sent"
	case method == "POST" && len(segs) == 4 && seg(0) == "platform" && seg(3) == "deploy":
		out["deployment_id"] = id("dep")
		out["service_id"] = seg(2)
		out["status"] = "healthy"
	case method == "POST" && route == "POST /broker/orders":
		out["broker_order_id"] = id("bo")
		out["status"] = "filled"
	default:
		if len(segs) > 0 {
			out["id"] = segs[len(segs)-1]
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}
