package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Request bodies are read whole (within their http.MaxBytesReader limit)
// and checked before they are decoded: a key given twice in one object is
// refused, whatever the object, because encoding/json keeps the last one
// silently while a proxy, a log or a signature check in front of the API
// may have read the first.

// readBody reads a request body whole; a body over its limit is a 413.
func readBody(body io.Reader) ([]byte, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, jsonError(err)
	}
	return b, nil
}

// maxKeyScanDepth stops the duplicate-key scan at a nesting the decoder
// refuses anyway (encoding/json's own limit is 10000).
const maxKeyScanDepth = 10000

// checkDuplicateKeys refuses, with 400 invalid_json naming the key and
// where it is ("key \"amount\" is given twice in params"), the first
// object in data that holds a key twice. Keys are compared as decoded
// ("amount" and "am\u006funt" are one key), exactly (case matters, as it
// does for a map). Malformed JSON is left to the decoder, which reports it
// with its position.
func checkDuplicateKeys(data []byte) error {
	var stack []*jsonFrame
	// childPath names the value about to be read.
	childPath := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.object {
			if top.path == "" {
				return top.key
			}
			return top.path + "." + top.key
		}
		return fmt.Sprintf("%s[%d]", top.path, top.index)
	}
	// valueDone moves the enclosing container past the value just read.
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		top := stack[len(stack)-1]
		if top.object {
			top.wantKey = true
		} else {
			top.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil || len(stack) > maxKeyScanDepth {
			return nil // the end, or malformed: the decoder says which
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			top := stack[n-1]
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			key, ok := tok.(string)
			if !ok {
				return nil
			}
			if top.has(key) {
				where := ""
				if top.path != "" {
					where = " in " + truncate(top.path, 128)
				}
				return errorf(http.StatusBadRequest, codeInvalidJSON, "key %q is given twice%s", truncate(key, 64), where)
			}
			top.add(key)
			top.key, top.wantKey = key, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &jsonFrame{object: true, path: childPath(), wantKey: true})
		case json.Delim('['):
			stack = append(stack, &jsonFrame{path: childPath()})
		case json.Delim(']'):
			if len(stack) == 0 {
				return nil
			}
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// jsonFrame is an object or array open in checkDuplicateKeys.
type jsonFrame struct {
	object  bool
	path    string              // where it is: "", "params", "facts[3].attrs"
	keys    []string            // the object's keys so far, while few
	set     map[string]struct{} // then a set
	key     string              // the key whose value comes next
	wantKey bool
	index   int // the next element of an array
}

// keySetMax is how many keys an object holds before they go in a map.
const keySetMax = 16

func (f *jsonFrame) has(k string) bool {
	if f.set != nil {
		_, ok := f.set[k]
		return ok
	}
	for _, x := range f.keys {
		if x == k {
			return true
		}
	}
	return false
}

func (f *jsonFrame) add(k string) {
	if f.set == nil && len(f.keys) < keySetMax {
		f.keys = append(f.keys, k)
		return
	}
	if f.set == nil {
		f.set = make(map[string]struct{}, 2*keySetMax)
		for _, x := range f.keys {
			f.set[x] = struct{}{}
		}
		f.keys = nil
	}
	f.set[k] = struct{}{}
}

// JSON request bodies (facts, actions, connectors, admin tenants and
// benchmark runs) must be labelled JSON: Content-Type application/json or
// application/*+json, with no charset or UTF-8. Anything else is a 415 with
// Accept-Post: application/json, so form data (what `curl -d` sends) is
// never read as JSON by accident. A request with no Content-Type at all is
// taken as JSON, so a bare client or `curl --data-binary` without -H works.
// Contracts are not a JSON route: they are YAML or JSON, read by content.

// codeUnsupportedMediaType is the error code of a 415.
const codeUnsupportedMediaType = "unsupported_media_type"

// jsonOnly answers 415 to a body that is labelled as something else than
// JSON, and passes the rest to next.
func (s *Server) jsonOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONMediaType(ct) {
			w.Header().Set("Accept-Post", "application/json")
			s.writeError(w, r, errorf(http.StatusUnsupportedMediaType, codeUnsupportedMediaType,
				"Content-Type %q is not JSON; send application/json", truncate(ct, 64)))
			return
		}
		next(w, r)
	}
}

// isJSONMediaType reports whether a Content-Type is application/json or
// application/*+json, without a charset or with UTF-8.
func isJSONMediaType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	sub, ok := strings.CutPrefix(mt, "application/")
	if !ok || (sub != "json" && !(strings.HasSuffix(sub, "+json") && len(sub) > len("+json"))) {
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return false
	}
	return true
}
