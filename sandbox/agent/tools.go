package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/commitlayer/commitlayer/llm"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// ToolSpec describes one tool: the HTTP call it makes and its arguments.
// A model-driven agent can offer these to a model as they are.
type ToolSpec struct {
	Name        string
	Description string
	Method      string
	// Path has "{arg}" segments filled from the arguments.
	Path string
	// Body names the arguments sent in the JSON body (omitted when absent).
	Body []string
	// Write is true for calls that change state.
	Write bool
}

// Tools lists every tool, writes first.
var Tools = []ToolSpec{
	{Name: "refund", Description: "refund part or all of an order's charge", Method: "POST",
		Path: "/payments/refunds", Body: []string{"order_id", "amount", "currency", "reason"}, Write: true},
	{Name: "update_order_status", Description: "set an order's status", Method: "POST",
		Path: "/orders/orders/{order_id}/status", Body: []string{"status"}, Write: true},
	{Name: "add_note", Description: "add a note to a support ticket", Method: "POST",
		Path: "/tickets/tickets/{ticket_id}/notes", Body: []string{"body"}, Write: true},
	{Name: "close_ticket", Description: "close a support ticket with a resolution", Method: "POST",
		Path: "/tickets/tickets/{ticket_id}/close", Body: []string{"resolution"}, Write: true},
	{Name: "cancel_subscription", Description: "cancel a subscription", Method: "POST",
		Path: "/crm/subscriptions/{subscription_id}/cancel", Body: []string{"reason"}, Write: true},
	{Name: "stop_billing", Description: "stop billing a subscription", Method: "POST",
		Path: "/payments/billing/stop", Body: []string{"subscription_id"}, Write: true},
	{Name: "change_address", Description: "change an order's shipping address", Method: "POST",
		Path: "/orders/orders/{order_id}/address", Body: []string{"address"}, Write: true},
	{Name: "approve_discount", Description: "apply a percentage discount to an order", Method: "POST",
		Path: "/orders/orders/{order_id}/discounts", Body: []string{"percent"}, Write: true},
	{Name: "send_payout", Description: "send money to an account", Method: "POST",
		Path: "/ledger/payouts", Body: []string{"account_id", "amount", "currency"}, Write: true},
	{Name: "deploy", Description: "deploy a version of a service to an environment", Method: "POST",
		Path: "/platform/services/{service_id}/deploy", Body: []string{"version", "environment"}, Write: true},
	{Name: "place_order", Description: "place a limit order for a product", Method: "POST",
		Path: "/broker/orders", Body: []string{"product_id", "account_id", "side", "quantity", "limit_price"}, Write: true},
	{Name: "get_order", Description: "read an order", Method: "GET", Path: "/orders/orders/{order_id}"},
	{Name: "get_charge", Description: "read an order's charge", Method: "GET", Path: "/payments/charges/{order_id}"},
	{Name: "get_ticket", Description: "read a support ticket and its notes", Method: "GET", Path: "/tickets/tickets/{ticket_id}"},
	{Name: "get_customer", Description: "read a customer", Method: "GET", Path: "/crm/customers/{customer_id}"},
	{Name: "get_subscription", Description: "read a subscription", Method: "GET", Path: "/crm/subscriptions/{subscription_id}"},
	{Name: "get_account", Description: "read a ledger account", Method: "GET", Path: "/ledger/accounts/{account_id}"},
	{Name: "get_service", Description: "read a service", Method: "GET", Path: "/platform/services/{service_id}"},
	{Name: "get_product", Description: "read a product", Method: "GET", Path: "/broker/products/{product_id}"},
}

// Tool returns the spec of the named tool.
func Tool(name string) (ToolSpec, bool) {
	for _, t := range Tools {
		if t.Name == name {
			return t, true
		}
	}
	return ToolSpec{}, false
}

// A tool call attempt is recorded as an llm.Attempt, the one type every
// trajectory (scripted, model-driven, replayed) and its judges use.

// retryable reports whether trying again could help: a timeout, a
// transport error, 429 or a 5xx.
func retryable(c llm.Attempt) bool {
	if c.Status == 0 {
		return true
	}
	return c.Status == http.StatusTooManyRequests || c.Status >= 500
}

// failure describes why a call did not succeed, for the agent's report:
// the error, or the status with the error code and message of the answer.
func failure(c llm.Attempt) string {
	if c.Error != "" {
		return fmt.Sprintf("%s: %s", c.Tool, c.Error)
	}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal([]byte(c.Response), &e) == nil && e.Error.Code != "" {
		return fmt.Sprintf("%s: %d %s: %s", c.Tool, c.Status, e.Error.Code, e.Error.Message)
	}
	return fmt.Sprintf("%s: status %d", c.Tool, c.Status)
}

// Client calls the sandbox systems' tools over HTTP.
type Client struct {
	// BaseURL is the enterprise's URL ("http://127.0.0.1:PORT").
	BaseURL string
	// HTTP is the client to use (its transport may be a chaos transport);
	// nil means one with a 10 s timeout.
	HTTP *http.Client
	// Timeout bounds each attempt; 0 means 10 s.
	Timeout time.Duration
}

// maxResponse bounds a response body kept in the trajectory.
const maxResponse = 1 << 20

// Do makes one attempt of a tool call with the given idempotency key ("" for
// none). Errors of the call itself are recorded in the returned Call; the
// error result is only for a call that could not be made (unknown tool,
// missing argument).
func (c *Client) Do(ctx context.Context, tool string, args map[string]any, key string) (llm.Attempt, error) {
	spec, ok := Tool(tool)
	if !ok {
		return llm.Attempt{}, fmt.Errorf("call tool %q: unknown tool", tool)
	}
	path, body, err := spec.request(args)
	if err != nil {
		return llm.Attempt{}, fmt.Errorf("call tool %q: %w", tool, err)
	}
	call := llm.Attempt{Tool: tool, Args: args, Attempt: 1, Method: spec.Method, Path: path, Body: string(body)}
	if spec.Write {
		call.IdempotencyKey = key
	}
	if err := c.send(ctx, &call); err != nil {
		return llm.Attempt{}, fmt.Errorf("call tool %q: %w", tool, err)
	}
	return call, nil
}

// send makes call's HTTP request (its method, path, body and idempotency
// key) and records the answer in it: the status and body, or the
// transport error as an agent sees it. The error result is only for a
// request that could not be built.
func (c *Client) send(ctx context.Context, call *llm.Attempt) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if call.Method != http.MethodGet {
		rd = strings.NewReader(call.Body)
	}
	req, err := http.NewRequestWithContext(ctx, call.Method, strings.TrimRight(c.BaseURL, "/")+call.Path, rd)
	if err != nil {
		return err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if call.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", call.IdempotencyKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: timeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		call.Error = describe(err)
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	call.Status = resp.StatusCode
	call.Response = string(b)
	if err != nil {
		call.Error = "read response: " + describe(err)
	}
	return nil
}

// describe names a transport error the way an agent would see it.
func describe(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout: " + err.Error()
	}
	return err.Error()
}

// request builds the path and JSON body from args.
func (s ToolSpec) request(args map[string]any) (string, []byte, error) {
	segs := strings.Split(s.Path, "/")
	for i, seg := range segs {
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") {
			continue
		}
		name := seg[1 : len(seg)-1]
		v, ok := args[name]
		sv := fmt.Sprint(v)
		if !ok || v == nil || sv == "" {
			return "", nil, fmt.Errorf("argument %q is required", name)
		}
		segs[i] = url.PathEscape(sv)
	}
	if s.Method == http.MethodGet {
		return strings.Join(segs, "/"), nil, nil
	}
	body := map[string]any{}
	for _, k := range s.Body {
		if v, ok := args[k]; ok && v != nil {
			body[k] = v
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return "", nil, fmt.Errorf("encode body: %w", err)
	}
	return strings.Join(segs, "/"), b, nil
}

// IdempotencyKey derives the key a careful agent sends for a tool call: the
// same for every retry of one call within one task, different for another
// tool, other arguments or another task.
func IdempotencyKey(t Task, requestedAt time.Time, tool string, args map[string]any) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%s\n", t.AgentID, t.Process, t.Subject, t.TicketID, requestedAt.UTC().Format(time.RFC3339Nano))
	writeSorted(h, t.Params)
	fmt.Fprintf(h, "\n%s\n", tool)
	writeSorted(h, args)
	return "ag-" + hex.EncodeToString(h.Sum(nil))[:32]
}

func writeSorted(w io.Writer, m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s=%v;", k, m[k])
	}
}
