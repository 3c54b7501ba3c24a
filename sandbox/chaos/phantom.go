package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

var phantomSeq atomic.Int64

// phantom answers a PhantomSuccess call. For a route that changes an
// existing record it first reads that record through the inner transport
// (a GET: nothing is written) so the made-up answer carries its real fields.
func (t *Transport) phantom(req *http.Request) []byte {
	reqBody := readRequest(req)
	path := strings.TrimPrefix(req.URL.Path, t.prefix)
	var current []byte
	if rp := resourceOf(req.Method, path); rp != "" {
		u := *req.URL
		u.Path = t.prefix + rp
		u.RawQuery = ""
		get, err := http.NewRequestWithContext(req.Context(), http.MethodGet, u.String(), nil)
		if err == nil {
			if resp, err := t.inner.RoundTrip(get); err == nil {
				b, err := readBody(resp)
				if err == nil && resp.StatusCode == http.StatusOK {
					current = b
				}
			}
		}
	}
	// The transport numbers its own made-up ids, so a scenario replayed
	// on a fresh transport is answered the same ids.
	return phantomBody(t.phantoms.Add(1), req.Method, path, reqBody, current)
}

// resourceOf returns the record a write changes in place ("/orders/orders/o_1"
// for "POST /orders/orders/o_1/status"), or "" for writes that create one.
func resourceOf(method, path string) string {
	segs := splitPath(path)
	if method != http.MethodPost || len(segs) != 4 {
		return ""
	}
	switch segs[0] + " " + segs[3] {
	case "orders status", "orders address", "crm cancel", "tickets close", "platform deploy":
		return "/" + strings.Join(segs[:3], "/")
	}
	return ""
}

// phantomBody builds a plausible 200 body for a call that was never
// forwarded: the shape of the sandbox system's real answer for the route,
// filled from the request body, the path, and current (the record the write
// would change, when known), with made-up ids numbered n. Unknown routes
// get the request body echoed with an "id".
func phantomBody(n int64, method, path string, reqBody, current []byte) []byte {
	in := decodeObject(reqBody)
	out := decodeObject(current)
	id := func(prefix string) string { return fmt.Sprintf("%s_ph%d", prefix, n) }
	segs := splitPath(path)
	seg := func(i int) string {
		if i < len(segs) {
			return segs[i]
		}
		return ""
	}
	copyKeys := func(keys ...string) {
		for _, k := range keys {
			if v, ok := in[k]; ok {
				out[k] = v
			}
		}
	}
	last := ""
	if len(segs) == 4 {
		last = seg(0) + " " + seg(3)
	}
	switch {
	case method != http.MethodPost:
		for k, v := range in {
			out[k] = v
		}
		if len(segs) > 0 {
			out["id"] = segs[len(segs)-1]
		}
	case strings.Join(segs, "/") == "payments/refunds":
		copyKeys("order_id", "amount", "currency", "reason")
		out["id"] = id("re")
		out["charge_id"] = fmt.Sprintf("ch_%v", in["order_id"])
		if _, ok := out["reason"]; !ok {
			out["reason"] = ""
		}
		out["status"] = "succeeded"
	case strings.Join(segs, "/") == "payments/billing/stop":
		copyKeys("subscription_id")
		out["status"] = "stopped"
	case last == "orders status":
		out["id"] = seg(2)
		copyKeys("status")
	case last == "orders address":
		out["id"] = seg(2)
		copyKeys("address")
	case last == "orders discounts":
		out["id"] = id("d")
		out["order_id"] = seg(2)
		copyKeys("percent")
	case last == "crm cancel":
		out["id"] = seg(2)
		out["status"] = "cancelled"
	case last == "tickets notes":
		out["id"] = id("n")
		out["ticket_id"] = seg(2)
		out["author"] = "agent"
		copyKeys("body", "author")
		out["created_at"] = time.Now().UTC().Format(time.RFC3339)
	case last == "tickets close":
		out["id"] = seg(2)
		out["status"] = "closed"
		copyKeys("resolution")
	case strings.Join(segs, "/") == "ledger/payouts":
		copyKeys("account_id", "amount", "currency")
		out["id"] = id("po")
		out["status"] = "sent"
	case last == "platform deploy":
		svc := out
		out = map[string]any{"id": id("dep"), "service_id": seg(2), "previous_version": svc["version"],
			"health": "healthy", "status": "deployed"}
		copyKeys("version", "environment")
	case strings.Join(segs, "/") == "broker/orders":
		copyKeys("product_id", "account_id", "side", "quantity", "limit_price")
		oid := id("bo")
		out["id"] = oid
		out["status"] = "filled"
		fill := map[string]any{"id": id("f"), "broker_order_id": oid, "status": "filled"}
		for _, k := range []string{"product_id", "account_id", "side", "quantity"} {
			if v, ok := in[k]; ok {
				fill[k] = v
			}
		}
		if p, ok := in["limit_price"]; ok {
			fill["price"] = p
			pn, ok1 := p.(json.Number)
			qn, ok2 := in["quantity"].(json.Number)
			if ok1 && ok2 {
				pi, err1 := pn.Int64()
				qi, err2 := qn.Int64()
				if err1 == nil && err2 == nil {
					fill["notional"] = pi * qi
				}
			}
		}
		out["fill"] = fill
	default:
		for k, v := range in {
			out[k] = v
		}
		out["id"] = id("ph")
	}
	b, err := json.Marshal(out)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// decodeObject decodes a JSON object keeping numbers exact; anything else
// gives an empty map.
func decodeObject(b []byte) map[string]any {
	m := map[string]any{}
	if len(bytes.TrimSpace(b)) == 0 {
		return m
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return map[string]any{}
	}
	if _, err := dec.Token(); err != io.EOF {
		return map[string]any{}
	}
	return m
}
