package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/service"
)

// Error codes sent in {"error":{"code"}}.
const (
	codeInvalidJSON          = "invalid_json"
	codeInvalidRequest       = "invalid_request"
	codeTooLarge             = "too_large"
	codeUnauthorized         = "unauthorized"
	codeForbidden            = "forbidden"
	codeNotFound             = "not_found"
	codeMethodNotAllowed     = "method_not_allowed"
	codeUnknownContract      = "unknown_contract"
	codeInvalidContract      = "invalid_contract"
	codeSubjectMismatch      = "subject_mismatch"
	codeUnsupportedKind      = "unsupported_connector_kind"
	codeAddressNotAllowed    = "address_not_allowed"
	codeConflict             = "conflict"
	codeIdempotency          = "idempotency_conflict"
	codeVerificationEnded    = "verification_ended"
	codeUnavailable          = "unavailable"
	codeTooManyKeys          = "too_many_wrong_keys"
	codeInternal             = "internal"
	codeUnsupportedMediaType = "unsupported_media_type"
)

// apiError is an error meant for the client, sent as it is. Anything else
// is internal and answered with a generic 500.
type apiError struct {
	Status  int
	Code    string
	Message string
	Details []client.ErrorDetail // a contract's problems
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// notFound is the 404 of a path's id.
func notFound(what, id string) *apiError {
	return errorf(http.StatusNotFound, codeNotFound, "no %s %q", what, commitlayer.Clip(id, 128))
}

// writeError answers err in the API's error shape.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.answer(w, r, err)
	var body client.ErrorBody
	body.Error.Code = ae.Code
	body.Error.Message = ae.Message
	body.Error.Details = ae.Details
	writeJSON(w, ae.Status, body)
}

// answer is what the client is told of err, its headers set: a client
// error as it is, ErrUnavailable a 503, anything else a generic 500 (the
// detail of those two goes only to the log).
func (s *Server) answer(w http.ResponseWriter, r *http.Request, err error) *apiError {
	ae := clientError(err)
	switch {
	case ae != nil:
	case errors.Is(err, commitlayer.ErrUnavailable):
		s.logError(r, "unavailable", err)
		w.Header().Set("Retry-After", "1")
		ae = &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable,
			Message: "the service cannot reach its database now; retry shortly"}
	default:
		s.logError(r, "internal error", err)
		ae = &apiError{Status: http.StatusInternalServerError, Code: codeInternal, Message: "internal error"}
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="commitlayer"`)
	}
	return ae
}

func (s *Server) logError(r *http.Request, msg string, err error) {
	s.log.ErrorContext(r.Context(), msg, "err", err, "request_id", requestIDOf(r.Context()),
		"tenant", loggedTenant(r.Context()), "method", r.Method, "path", r.URL.Path)
}

// writeJSON sends v with status. It returns nil so a handler can end with
// it: a failed write is a client gone, with nothing more to tell.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// views maps a store's list to its wire form, [] (never null) when empty.
func views[T, V any](xs []T, view func(T) V) []V {
	out := make([]V, 0, len(xs))
	for _, x := range xs {
		out = append(out, view(x))
	}
	return out
}

// storeErr is a store call's err about the what named id: a 404 when it
// wraps ErrNotFound, else wrapped as "op what: err".
func storeErr(err error, op, what, id string) error {
	switch {
	case err == nil:
		return nil
	case isNotFound(err):
		return notFound(what, id)
	}
	return fmt.Errorf("%s %s: %w", op, what, err)
}

func isNotFound(err error) bool { return errors.Is(err, commitlayer.ErrNotFound) }
func isConflict(err error) bool { return errors.Is(err, commitlayer.ErrConflict) }
func isInvalid(err error) bool  { return errors.Is(err, commitlayer.ErrInvalid) }

// clientError maps an error meant for the client to its answer
// (*commitlayer.Error by kind: 422, 404, 409); nil for anything else.
func clientError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *FilterError
	if errors.As(err, &fe) {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "%s", fe.Error())
	}
	var stale *service.StaleContractError
	if errors.As(err, &stale) {
		ae := contractError(stale.Err)
		ae.Message = stale.Error()
		return ae
	}
	var ce *commitlayer.Error
	if !errors.As(err, &ce) {
		return nil
	}
	status := http.StatusUnprocessableEntity
	switch {
	case errors.Is(ce.Kind, commitlayer.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(ce.Kind, commitlayer.ErrConflict):
		status = http.StatusConflict
	}
	return &apiError{Status: status, Code: ce.Code, Message: ce.Message}
}
