package systems

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
)

// Error codes shared by every system (docs/sandbox-vocabulary.md).
const (
	CodeNotFound             = "not_found"
	CodeInvalidRequest       = "invalid_request"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeTooLarge             = "request_too_large"
	CodeInternal             = "internal_error"
)

// APIError is a refusal with its HTTP status and code. Operations return it
// for bad input and business refusals; any other error is internal.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// declined marks a 400 that is a refusal of the request given the
	// state (a spent charge), not bad input: like any business refusal it
	// is stored under the request's Idempotency-Key, as Stripe does.
	declined bool
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

func notFound(kind, id string) *APIError {
	return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf("no %s %q", kind, id)}
}

func invalid(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

func refuse(status int, code, format string, args ...any) *APIError {
	return &APIError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Decline is a 400 refusal of a well-formed request because of the state
// it meets (Stripe's charge_already_refunded, amount_too_large): unlike bad
// input it is stored under the request's Idempotency-Key and replayed.
func Decline(code, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...), declined: true}
}

// missing turns sql.ErrNoRows into a 404 for kind/id.
func missing(err error, kind, id string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(kind, id)
	}
	return err
}

type errorBody struct {
	Error *APIError `json:"error"`
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal_error","message":"internal error"}}`)
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}

// writeError answers an error: an *APIError as itself, anything else as a
// generic 500 whose details only go to the log.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := errorResponse(r, err)
	writeRaw(w, status, body)
}

func errorResponse(r *http.Request, err error) (int, []byte) {
	var ae *APIError
	if !errors.As(err, &ae) {
		slog.ErrorContext(r.Context(), "sandbox system internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
	}
	b, _ := json.Marshal(errorBody{Error: ae})
	return ae.Status, b
}

// maxBody bounds a request body.
const maxBody = 1 << 20

// maxKey bounds an Idempotency-Key.
const maxKey = 255

// decode reads a JSON object strictly into dst: unknown fields, trailing
// data and wrong types are 400; an empty body counts as {}.
func decode(r *http.Request, dst any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return invalid("read body: %v", err)
	}
	if len(b) > maxBody {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: "body is larger than 1 MiB"}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return invalid("malformed JSON body: %s", jsonProblem(err))
	}
	if dec.More() {
		return invalid("malformed JSON body: data after the object")
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		return invalid("malformed JSON body: data after the object")
	}
	return nil
}

// jsonProblem describes a decoding error without echoing Go type names.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		return "the body must be a JSON object"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "unexpected end of input"
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return "unknown field " + strings.TrimPrefix(msg, "json: unknown field ")
	}
	return "invalid JSON"
}

func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case k == "string":
		return "a string"
	case k == "bool":
		return "a boolean"
	default:
		return "of another type"
	}
}

// op is one write operation behind a route: it validates, changes state
// through tx and returns the response body, or an *APIError.
type op func(tx *Tx) (any, error)

// serveWrite runs a decoded write request with Idempotency-Key semantics:
// the first request with a key is executed and its response (success or
// business refusal) stored in the same transaction; a later request with the
// same key and the same method, path and body gets the stored response and
// changes nothing; the same key with another method, path or body is 409.
// Bad input (400) is never stored, so it can be corrected and retried; a
// 400 from Decline is a business refusal and is stored.
func (s *System) serveWrite(w http.ResponseWriter, r *http.Request, req any, fn op) {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxKey {
		writeError(w, r, invalid("Idempotency-Key is longer than %d bytes", maxKey))
		return
	}
	canon, err := json.Marshal(req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", r.Method, r.URL.Path)
	h.Write(canon)
	fp := hex.EncodeToString(h.Sum(nil))

	status, body, replayed, err := s.runWrite(r, key, fp, fn)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeRaw(w, status, body)
}

// runWrite returns the response to send, or an error that is not stored.
func (s *System) runWrite(r *http.Request, key, fp string, fn op) (status int, body []byte, replayed bool, err error) {
	// A write that has started finishes even if the client goes away, as on
	// a real server: a caller that times out does not know whether it
	// committed (the lost-response case).
	ctx := context.WithoutCancel(r.Context())
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.begin(ctx)
	if err != nil {
		return 0, nil, false, fmt.Errorf("%s write: %w", s.name, err)
	}
	defer tx.rollback()
	if key != "" {
		var storedFP, storedBody string
		var storedStatus int
		err := tx.QueryRow(`SELECT fingerprint, status, body FROM idempotency_keys WHERE key = ?`, key).
			Scan(&storedFP, &storedStatus, &storedBody)
		switch {
		case err == nil:
			if storedFP != fp {
				return 0, nil, false, refuse(http.StatusConflict, CodeIdempotencyKeyReused,
					"Idempotency-Key %q was used with another request", key)
			}
			return storedStatus, []byte(storedBody), true, nil
		case !errors.Is(err, sql.ErrNoRows):
			return 0, nil, false, fmt.Errorf("%s idempotency lookup: %w", s.name, err)
		}
	}
	res, opErr := fn(tx)
	if opErr != nil {
		var ae *APIError
		if !errors.As(opErr, &ae) || (ae.Status == http.StatusBadRequest && !ae.declined) || key == "" {
			return 0, nil, false, opErr
		}
		// A business refusal is the request's result: store it under the key
		// (and nothing else), as payment APIs do.
		tx.rollback()
		status, body = errorResponse(r, ae)
		if err := s.storeKeyOnly(r, key, fp, status, body); err != nil {
			return 0, nil, false, err
		}
		return status, body, false, nil
	}
	body, err = json.Marshal(res)
	if err != nil {
		return 0, nil, false, fmt.Errorf("%s encode response: %w", s.name, err)
	}
	if key != "" {
		if err := storeKey(tx, key, fp, r, http.StatusOK, body); err != nil {
			return 0, nil, false, err
		}
	}
	if err := tx.commit(); err != nil {
		return 0, nil, false, fmt.Errorf("%s write: %w", s.name, err)
	}
	return http.StatusOK, body, false, nil
}

func (s *System) storeKeyOnly(r *http.Request, key, fp string, status int, body []byte) error {
	tx, err := s.begin(context.WithoutCancel(r.Context()))
	if err != nil {
		return fmt.Errorf("%s store idempotency key: %w", s.name, err)
	}
	defer tx.rollback()
	if err := storeKey(tx, key, fp, r, status, body); err != nil {
		return err
	}
	if err := tx.commit(); err != nil {
		return fmt.Errorf("%s store idempotency key: %w", s.name, err)
	}
	return nil
}

func storeKey(tx *Tx, key, fp string, r *http.Request, status int, body []byte) error {
	// The key's time is the write's, or the last write's for a refusal:
	// storing a key is not a write that advances the clock.
	at := tx.at
	if at.IsZero() {
		at = tx.sys.clock.Last()
	}
	_, err := tx.Exec(`INSERT INTO idempotency_keys(key, fingerprint, method, path, status, body, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, key, fp, r.Method, r.URL.Path, status, string(body), fmtTime(at))
	if err != nil {
		return fmt.Errorf("%s store idempotency key: %w", tx.sys.name, err)
	}
	return nil
}

// Event is one entry of a system's event log, as served by the feed.
type Event struct {
	ID         string          `json:"id"`
	Seq        int64           `json:"seq"`
	Type       string          `json:"type"`
	Subject    string          `json:"subject"`
	OccurredAt string          `json:"occurred_at"`
	Attrs      json.RawMessage `json:"attrs"`
	Links      json.RawMessage `json:"links"`
}

// Feed is the http_events page.
type Feed struct {
	Events []Event `json:"events"`
	Next   int64   `json:"next"`
	More   bool    `json:"more"`
}

// Feed limits.
const (
	DefaultLimit = 500
	MaxLimit     = 5000
)

// Events reads up to limit events with seq > after, in seq order.
func (s *System) Events(r *http.Request, after int64, limit int) (Feed, error) {
	rows, err := s.db.QueryContext(r.Context(),
		`SELECT seq, id, type, subject, occurred_at, attrs, links FROM events WHERE seq > ? ORDER BY seq LIMIT ?`,
		after, limit+1)
	if err != nil {
		return Feed{}, fmt.Errorf("%s read events: %w", s.name, err)
	}
	defer rows.Close()
	f := Feed{Events: []Event{}, Next: after}
	for rows.Next() {
		var e Event
		var attrs, links string
		if err := rows.Scan(&e.Seq, &e.ID, &e.Type, &e.Subject, &e.OccurredAt, &attrs, &links); err != nil {
			return Feed{}, fmt.Errorf("%s read events: %w", s.name, err)
		}
		if len(f.Events) == limit {
			f.More = true
			break
		}
		e.Attrs, e.Links = json.RawMessage(attrs), json.RawMessage(links)
		f.Events = append(f.Events, e)
		f.Next = e.Seq
	}
	if err := rows.Err(); err != nil {
		return Feed{}, fmt.Errorf("%s read events: %w", s.name, err)
	}
	return f, nil
}

// serveEvents answers GET /{system}/events?after=&limit=.
func (s *System) serveEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after := int64(0)
	if v := q.Get("after"); v != "" || q.Has("after") {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, r, invalid("after must be a non-negative integer, got %q", v))
			return
		}
		after = n
	}
	limit := DefaultLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, r, invalid("limit must be a positive integer, got %q", v))
			return
		}
		limit = min(n, MaxLimit)
	}
	f, err := s.Events(r, after, limit)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

// API is a system with HTTP routes.
type API interface {
	System() *System
	// Routes registers the system's routes, all under /{name}/.
	Routes(mux *http.ServeMux)
}

// Reconciler is a system whose event log follows an outside system of
// record (the payments system over Stripe): Reconcile appends what happened
// there since the last call, before each answer of its event feed.
type Reconciler interface {
	Reconcile(ctx context.Context) error
}

// Handler serves the given systems on one mux, each under /{name}/, with
// the event feed of each, and JSON errors for unknown routes (404) and
// wrong methods (405).
func Handler(services ...API) http.Handler {
	mux := http.NewServeMux()
	for _, svc := range services {
		sys := svc.System()
		events := sys.serveEvents
		if rc, ok := svc.(Reconciler); ok {
			events = func(w http.ResponseWriter, r *http.Request) {
				if err := rc.Reconcile(r.Context()); err != nil {
					writeError(w, r, err)
					return
				}
				sys.serveEvents(w, r)
			}
		}
		mux.HandleFunc("GET /"+sys.name+"/events", events)
		svc.Routes(mux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r) // sets the path values
			return
		}
		// No route: learn from the mux whether it is 404, 405 or a
		// redirect, and answer 404/405 in JSON.
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		switch rec.Code {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", rec.Header().Get("Allow"))
			writeError(w, r, refuse(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
		case http.StatusNotFound:
			writeError(w, r, refuse(http.StatusNotFound, CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
		default:
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		}
	})
}

// serveRead answers a read: fn's result as 200, or its error.
func serveRead(w http.ResponseWriter, r *http.Request, fn func() (any, error)) {
	v, err := fn()
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// handleWrite builds a handler that decodes a request of type Req and runs
// it with idempotency.
func handleWrite[Req any](s *System, fn func(tx *Tx, r *http.Request, req *Req) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req := new(Req)
		if err := decode(r, req); err != nil {
			writeError(w, r, err)
			return
		}
		s.serveWrite(w, r, req, func(tx *Tx) (any, error) { return fn(tx, r, req) })
	}
}

// do runs one operation as a Go call (the operator's path): the same write
// as over HTTP, without an idempotency key.
func do[T any](ctx context.Context, s *System, fn func(tx *Tx) (T, error)) (T, error) {
	var out T
	err := s.Write(ctx, func(tx *Tx) error {
		v, err := fn(tx)
		out = v
		return err
	})
	return out, err
}
