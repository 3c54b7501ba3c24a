package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// A Mount is an admin route the API serves for another part of the process
// (cmd mounts the sandbox benchmark's routes this way; the API knows
// nothing of what they do). It gets what the API's own admin routes get:
// the admin key (401 without it, 403 for a tenant's key), a request id,
// panic recovery, metrics and request logging under its pattern, 405 and
// 404 in the error shape, and a place in Routes.
type Mount struct {
	// Pattern is a ServeMux pattern with its method: "GET /v1/admin/x/{id}".
	Pattern string
	// JSONBody answers 415 to a body labelled as something else than JSON,
	// as the API's own POST routes do.
	JSONBody bool
	Handler  MountHandler
}

// MountHandler answers a mounted route. An error it returns is written in
// the API's error shape ({"error":{"code","message"}}): one made by Errorf
// as it is, one wrapping commitlayer.ErrUnavailable as a 503, a
// *commitlayer.Error by its kind, anything else as a generic 500 whose
// detail goes only to the log with the request id. A handler that returns
// an error has written nothing.
type MountHandler func(w http.ResponseWriter, r *http.Request) error

// Error codes a mounted handler may answer with besides its own.
const (
	CodeInvalidRequest = codeInvalidRequest
	CodeNotFound       = codeNotFound
	CodeConflict       = codeConflict
	CodeUnavailable    = codeUnavailable
)

// Errorf makes an answer meant for the client: its status, code and
// message are sent as they are (never put an internal error's text in it).
func Errorf(status int, code, format string, args ...any) error {
	return errorf(status, code, format, args...)
}

// DecodeJSON reads r's body, at most MaxBody bytes, as exactly one JSON
// value into dst the way the API's own routes do: unknown fields, keys given
// twice and trailing data refused. Its errors are answers (400 invalid_json
// or invalid_request, 413 too_large) for the handler to return.
func DecodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	return decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), dst)
}

// WriteJSON answers v as JSON with status, uncached.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// mount registers m behind the admin key.
func (s *Server) mount(m Mount) {
	if m.Handler == nil || !strings.Contains(m.Pattern, " ") {
		panic(fmt.Sprintf("api: mount %q: needs a \"METHOD /path\" pattern and a handler", m.Pattern))
	}
	h := handler(m.Handler)
	if m.JSONBody {
		h = jsonOnly(h)
	}
	s.handle(m.Pattern, authAdmin, h)
}

// mergeOpenAPI adds the paths and components of each fragment (an
// OpenAPI document holding only "paths" and "components") to base. A path
// or a component already there is a conflict: the mounts' author must pick
// another name.
func mergeOpenAPI(base []byte, fragments ...[]byte) ([]byte, error) {
	if len(fragments) == 0 {
		return base, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	var paths map[string]json.RawMessage
	var components map[string]map[string]json.RawMessage
	if err := json.Unmarshal(doc["paths"], &paths); err != nil {
		return nil, fmt.Errorf("openapi paths: %w", err)
	}
	if err := json.Unmarshal(doc["components"], &components); err != nil {
		return nil, fmt.Errorf("openapi components: %w", err)
	}
	for i, f := range fragments {
		var frag struct {
			Paths      map[string]json.RawMessage            `json:"paths"`
			Components map[string]map[string]json.RawMessage `json:"components"`
		}
		dec := json.NewDecoder(strings.NewReader(string(f)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&frag); err != nil {
			return nil, fmt.Errorf("openapi fragment %d: %w", i, err)
		}
		for p, item := range frag.Paths {
			if _, ok := paths[p]; ok {
				return nil, fmt.Errorf("openapi fragment %d: path %s is already documented", i, p)
			}
			paths[p] = item
		}
		for section, entries := range frag.Components {
			if components[section] == nil {
				components[section] = map[string]json.RawMessage{}
			}
			for name, v := range entries {
				if _, ok := components[section][name]; ok {
					return nil, fmt.Errorf("openapi fragment %d: components.%s.%s is already defined", i, section, name)
				}
				components[section][name] = v
			}
		}
	}
	var err error
	if doc["paths"], err = json.Marshal(paths); err != nil {
		return nil, err
	}
	if doc["components"], err = json.Marshal(components); err != nil {
		return nil, err
	}
	return json.MarshalIndent(doc, "", "  ")
}
