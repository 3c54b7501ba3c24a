// Package stripefake is a stateful, in-process imitation of the parts of the
// Stripe API that CommitLayer uses: PaymentIntents (create, confirm,
// retrieve), Refunds (create, list, retrieve), Charges (list, retrieve),
// Payouts and Disputes (list). It speaks Stripe's wire format (form-encoded requests, JSON
// objects, list envelopes, the {"error":{…}} shape) over a real loopback
// HTTP server, so code under test drives it through stripe-go exactly as it
// would drive api.stripe.com, and it behaves as Stripe does where the
// verdicts depend on it:
//
//   - idempotency: a POST with an Idempotency-Key that Stripe began to
//     execute stores its status and body; the same key with the same
//     parameters replays them with Idempotent-Replayed: true; the same key
//     with other parameters or another endpoint is 400 idempotency_error.
//     Requests refused by parameter validation are not stored;
//   - refunds: partial refunds add up; a refund of a fully refunded charge is
//     400 charge_already_refunded; a refund over the unrefunded amount is 400
//     amount_too_large; a refund of a PaymentIntent that has no successful
//     charge is 400;
//   - lists: newest first, filtered by payment_intent / charge / created,
//     paginated with limit (1–100, default 10), starting_after and
//     ending_before, answering has_more;
//   - keys: no key or a malformed one is 401; a restricted key (rk_…) may
//     read but not write (403), as a read-only restricted key would.
//
// It does not imitate everything: amounts are not checked against per-
// currency minimums, every confirmed card payment succeeds, refunds succeed
// at once, and payouts and disputes are planted with AddPayout/AddDispute
// rather than created through the API.
package stripefake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TestKey is a well-formed test secret key the fake accepts by default.
// It is a made-up value, not a real Stripe key.
const TestKey = "sk_test_commitlayerfake0000000000000000"

// keyPattern is the shape of a Stripe API key.
var keyPattern = regexp.MustCompile(`^(sk|rk)_(test|live)_[A-Za-z0-9]{8,}$`)

// Options configure a Fake.
type Options struct {
	// Keys, when set, are the only keys accepted; any other well-formed key
	// is 401 as well. Empty means every well-formed key is accepted.
	Keys []string
	// Now stamps created objects; nil means time.Now. Objects created in the
	// same second keep their creation order.
	Now func() time.Time
}

// Fake is a running fake Stripe. Close it when done.
type Fake struct {
	srv  *httptest.Server
	opts Options

	mu       sync.Mutex
	seq      int64
	lastAt   int64
	pis      []*paymentIntent
	charges  []*charge
	refunds  []*refund
	payouts  []*payout
	disputes []*dispute
	idem     map[string]savedResponse
	failures []failure
	requests []Request
}

// Request is one request the fake received, as recorded for tests: the
// method, path, the form parameters and whether an Idempotency-Key came.
type Request struct {
	Method         string
	Path           string
	Form           url.Values
	IdempotencyKey string
}

type savedResponse struct {
	fingerprint string
	status      int
	body        []byte
}

type failure struct {
	method, path string
	status       int
	left         int
}

// Start starts a fake Stripe on a loopback port.
func Start(opts Options) *Fake {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	f := &Fake{opts: opts, idem: map[string]savedResponse{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL is the fake's base URL, for stripe.BackendConfig.URL or
// STRIPE_API_BASE.
func (f *Fake) URL() string { return f.srv.URL }

// Client is an *http.Client for the fake's server.
func (f *Fake) Client() *http.Client { return f.srv.Client() }

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// FailNext makes the next n requests to method and path (e.g. "GET",
// "/v1/refunds") answer status (429 or a 5xx) in Stripe's error shape
// without doing anything.
func (f *Fake) FailNext(method, path string, status, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, failure{method: method, path: path, status: status, left: n})
}

// Requests returns the requests received so far, oldest first.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Refunds returns every refund as Stripe would list them for the account
// (newest first), as JSON objects.
func (f *Fake) Refunds() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]map[string]any, 0, len(f.refunds))
	for i := len(f.refunds) - 1; i >= 0; i-- {
		out = append(out, f.refunds[i].json())
	}
	return out
}

// RefundOutside creates a refund as if made in the Stripe dashboard: on the
// PaymentIntent's charge, amount 0 meaning what is left. It applies the same
// rules as POST /v1/refunds.
func (f *Fake) RefundOutside(paymentIntentID string, amount int64) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	form := url.Values{"payment_intent": {paymentIntentID}}
	if amount > 0 {
		form.Set("amount", strconv.FormatInt(amount, 10))
	}
	status, body, _ := f.createRefund(form)
	if status != http.StatusOK {
		return "", fmt.Errorf("refund outside: %d %s", status, body)
	}
	var r struct{ ID string }
	_ = json.Unmarshal(body, &r)
	return r.ID, nil
}

// AddPayout plants a payout (Stripe creates them on its schedule) and
// returns its id.
func (f *Fake) AddPayout(amount int64, currency, status string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &payout{ID: f.newID("po"), Amount: amount, Currency: strings.ToLower(currency), Status: status, Created: f.now()}
	f.payouts = append(f.payouts, p)
	return p.ID
}

// AddDispute plants a dispute on the charge of a PaymentIntent and returns
// its id.
func (f *Fake) AddDispute(paymentIntentID, reason string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi := f.findPI(paymentIntentID)
	if pi == nil || pi.LatestCharge == "" {
		return "", fmt.Errorf("add dispute: no charged PaymentIntent %q", paymentIntentID)
	}
	ch := f.findCharge(pi.LatestCharge)
	ch.Disputed = true
	d := &dispute{ID: f.newID("dp"), Amount: ch.Amount, Currency: ch.Currency, Charge: ch.ID, PaymentIntent: pi.ID,
		Reason: reason, Status: "needs_response", Created: f.now()}
	f.disputes = append(f.disputes, d)
	return d.ID, nil
}

// newID returns prefix_ followed by a unique, ordered suffix.
func (f *Fake) newID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s_Fk%014d", prefix, f.seq)
}

// now is the creation time of a new object: never before the previous one.
func (f *Fake) now() int64 {
	t := f.opts.Now().Unix()
	if t < f.lastAt {
		t = f.lastAt
	}
	f.lastAt = t
	return t
}

// Errors, in Stripe's shape.

type apiError struct {
	status  int
	typ     string
	code    string
	param   string
	message string
}

func (e apiError) body() []byte {
	m := map[string]any{"type": e.typ, "message": e.message}
	if e.code != "" {
		m["code"] = e.code
		m["doc_url"] = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(e.code, "_", "-")
	}
	if e.param != "" {
		m["param"] = e.param
	}
	b, _ := json.Marshal(map[string]any{"error": m})
	return b
}

func invalid(param, format string, args ...any) apiError {
	return apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, message: fmt.Sprintf(format, args...)}
}

func invalidCode(code, param, format string, args ...any) apiError {
	e := invalid(param, format, args...)
	e.code = code
	return e
}

func notFound(param, kind, id string) apiError {
	e := invalidCode("resource_missing", param, "No such %s: '%s'", kind, id)
	e.status = http.StatusNotFound
	return e
}

// serve authenticates, records, applies injected failures and routes.
func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Request-Id", "req_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := r.ParseForm(); err != nil {
		writeErr(w, invalid("", "Invalid request body: %v", err))
		return
	}
	key, aerr := f.authenticate(r)
	if aerr != nil {
		writeErr(w, *aerr)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	idemKey := r.Header.Get("Idempotency-Key")
	f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, Form: cloneValues(r.Form), IdempotencyKey: idemKey})
	for i := range f.failures {
		fl := &f.failures[i]
		if fl.left > 0 && fl.method == r.Method && fl.path == r.URL.Path {
			fl.left--
			e := apiError{status: fl.status, typ: "api_error", message: "An error occurred with our connection to Stripe. (injected)"}
			if fl.status == http.StatusTooManyRequests {
				e.typ, e.code, e.message = "invalid_request_error", "rate_limit", "Too many requests hit the API too quickly. (injected)"
			}
			writeErr(w, e)
			return
		}
	}
	if r.Method == http.MethodPost && strings.HasPrefix(key, "rk_") {
		writeErr(w, apiError{status: http.StatusForbidden, typ: "invalid_request_error",
			message: "The provided key '" + maskKey(key) + "' does not have the required permissions for this endpoint."})
		return
	}
	if r.Method != http.MethodPost {
		status, body := f.route(r)
		writeRaw(w, status, body)
		return
	}
	if len(idemKey) > 255 {
		writeErr(w, invalid("", "Idempotency-Key must be at most 255 characters"))
		return
	}
	fp := fingerprint(r)
	if idemKey != "" {
		if saved, ok := f.idem[idemKey]; ok {
			if saved.fingerprint != fp {
				writeErr(w, apiError{status: http.StatusBadRequest, typ: "idempotency_error", message: fmt.Sprintf(
					"Keys for idempotent requests can only be used with the same parameters they were first used with. "+
						"Try using a key other than '%s' if you meant to execute a different request.", idemKey)})
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			writeRaw(w, saved.status, saved.body)
			return
		}
	}
	status, body, executed := f.routeWrite(r)
	if idemKey != "" && executed {
		f.idem[idemKey] = savedResponse{fingerprint: fp, status: status, body: body}
	}
	writeRaw(w, status, body)
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// fingerprint identifies a write: endpoint and parameters.
func fingerprint(r *http.Request) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n%s", r.Method, r.URL.Path, r.PostForm.Encode())
	return hex.EncodeToString(h.Sum(nil))
}

func (f *Fake) authenticate(r *http.Request) (string, *apiError) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", message: "You did not provide an API key. " +
			"You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."}
	}
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || !keyPattern.MatchString(key) || (len(f.opts.Keys) > 0 && !slices.Contains(f.opts.Keys, key)) {
		return "", &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error",
			message: "Invalid API Key provided: " + maskKey(key)}
	}
	return key, nil
}

// maskKey shows a key as Stripe does in its errors: prefix and last 4.
func maskKey(key string) string {
	if len(key) <= 12 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

func writeErr(w http.ResponseWriter, e apiError) { writeRaw(w, e.status, e.body()) }

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Stripe-Version", "2024-06-20")
	w.WriteHeader(status)
	w.Write(body)
}

func ok(v any) (int, []byte) {
	b, _ := json.Marshal(v)
	return http.StatusOK, b
}

func fail(e apiError) (int, []byte) { return e.status, e.body() }

// route answers reads.
func (f *Fake) route(r *http.Request) (int, []byte) {
	p := r.URL.Path
	switch {
	case p == "/v1/refunds":
		return f.list(r, "/v1/refunds", f.refundItems(r.Form))
	case strings.HasPrefix(p, "/v1/refunds/") && strings.Count(p, "/") == 3:
		id := strings.TrimPrefix(p, "/v1/refunds/")
		for _, rf := range f.refunds {
			if rf.ID == id {
				return ok(rf.json())
			}
		}
		return fail(notFound("id", "refund", id))
	case p == "/v1/charges":
		return f.list(r, "/v1/charges", f.chargeItems(r.Form))
	case strings.HasPrefix(p, "/v1/charges/") && strings.Count(p, "/") == 3:
		id := strings.TrimPrefix(p, "/v1/charges/")
		if c := f.findCharge(id); c != nil {
			return ok(c.json())
		}
		return fail(notFound("id", "charge", id))
	case p == "/v1/payouts":
		return f.list(r, "/v1/payouts", f.payoutItems(r.Form))
	case p == "/v1/disputes":
		return f.list(r, "/v1/disputes", f.disputeItems(r.Form))
	case strings.HasPrefix(p, "/v1/payment_intents/") && strings.Count(p, "/") == 3:
		id := strings.TrimPrefix(p, "/v1/payment_intents/")
		if pi := f.findPI(id); pi != nil {
			return ok(pi.json())
		}
		return fail(notFound("intent", "payment_intent", id))
	}
	return fail(unrecognized(r))
}

func unrecognized(r *http.Request) apiError {
	e := invalid("", "Unrecognized request URL (%s: %s). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.", r.Method, r.URL.Path)
	e.status = http.StatusNotFound
	return e
}

// routeWrite answers writes; executed reports whether the request got past
// validation (and so is stored under its idempotency key).
func (f *Fake) routeWrite(r *http.Request) (status int, body []byte, executed bool) {
	p := r.URL.Path
	switch {
	case p == "/v1/payment_intents":
		if e, bad := checkParams(r.PostForm, "amount", "currency", "payment_method", "payment_method_types", "confirm",
			"metadata", "description", "capture_method", "customer", "expand"); bad {
			return e.status, e.body(), false
		}
		return f.createPI(r.PostForm)
	case strings.HasPrefix(p, "/v1/payment_intents/") && strings.HasSuffix(p, "/confirm") && strings.Count(p, "/") == 4:
		if e, bad := checkParams(r.PostForm, "payment_method", "expand"); bad {
			return e.status, e.body(), false
		}
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/payment_intents/"), "/confirm")
		return f.confirmPI(id, r.PostForm.Get("payment_method"))
	case p == "/v1/refunds":
		if e, bad := checkParams(r.PostForm, "amount", "charge", "payment_intent", "reason", "metadata", "expand"); bad {
			return e.status, e.body(), false
		}
		return f.createRefund(r.PostForm)
	}
	e := unrecognized(r)
	return e.status, e.body(), false
}

// checkParams refuses unknown parameters, as Stripe does.
func checkParams(form url.Values, allowed ...string) (apiError, bool) {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		base, _, _ := strings.Cut(k, "[")
		if !slices.Contains(allowed, base) {
			return invalidCode("parameter_unknown", k, "Received unknown parameter: %s", k), true
		}
	}
	return apiError{}, false
}

func metadata(form url.Values) map[string]string {
	md := map[string]string{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(v) > 0 {
			md[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	return md
}

// arrayParam reads name[0], name[1], … or name[] values.
func arrayParam(form url.Values, name string) []string {
	var out []string
	out = append(out, form[name+"[]"]...)
	for i := 0; ; i++ {
		v, ok := form[name+"["+strconv.Itoa(i)+"]"]
		if !ok {
			break
		}
		out = append(out, v...)
	}
	return out
}

func positiveInt(form url.Values, name string) (int64, bool, *apiError) {
	v, ok := form[name]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || n <= 0 {
		e := invalidCode("parameter_invalid_integer", name, "Invalid positive integer")
		return 0, true, &e
	}
	return n, true, nil
}
