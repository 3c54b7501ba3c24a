package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// A Mount is an admin route the API serves for another part of the process
// (cmd mounts the sandbox benchmark's), with everything the API's own admin
// routes get: the admin key, request ids, metrics, logging, error shape.
type Mount struct {
	Pattern  string // with its method: "GET /v1/admin/x/{id}"
	JSONBody bool   // answer 415 to a body not labelled JSON
	Handler  MountHandler
}

// MountHandler answers a mounted route. An error it returns (having written
// nothing) is answered as the API's own: Errorf's as it is, anything
// unknown as a generic 500.
type MountHandler func(w http.ResponseWriter, r *http.Request) error

// Error codes a mounted handler may answer with besides its own.
const (
	CodeInvalidRequest = codeInvalidRequest
	CodeNotFound       = codeNotFound
	CodeConflict       = codeConflict
	CodeUnavailable    = codeUnavailable
)

// Errorf makes an answer sent to the client as it is (never put an
// internal error's text in it).
func Errorf(status int, code, format string, args ...any) error {
	return errorf(status, code, format, args...)
}

// DecodeJSON reads r's body (at most MaxBody) into dst as the API's own
// routes do; its errors are answers for the handler to return.
func DecodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	return decodeJSON(http.MaxBytesReader(w, r.Body, MaxBody), dst)
}

// WriteJSON answers v as JSON with status, uncached.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

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

// mergeOpenAPI adds each fragment's "paths" and "components" to base; one
// already there is an error.
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
