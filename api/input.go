package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
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

// checkDuplicateKeys refuses a string that is not valid text (invalid
// UTF-8, an unpaired surrogate escape) with 400 naming the field, and
// refuses, with 400 invalid_json naming the key and
// where it is ("key \"amount\" is given twice in params"), the first
// object in data that holds a key twice. Keys are compared as decoded
// ("amount" and "am\u006funt" are one key), exactly (case matters, as it
// does for a map). Malformed JSON is left to the decoder, which reports it
// with its position: the scan stops where it stops making sense.
//
// The scan walks the bytes itself, without allocating for unescaped keys
// or for paths (built only for the error): json.Decoder.Token allocates
// for every token and would cost more than the decoding it guards.
func checkDuplicateKeys(data []byte) error {
	s := keyScan{data: data}
	for {
		s.space()
		if s.i >= len(s.data) {
			return nil
		}
		if err := s.value(0); err != nil {
			if errors.Is(err, errScanStop) {
				return nil
			}
			return err
		}
	}
}

// keyScan is the state of checkDuplicateKeys.
type keyScan struct {
	data []byte
	i    int
	path []pathSeg // from the body to the value being read
	keys [][]byte  // the keys of the open objects, innermost last
}

// pathSeg is a step of a path: an object key, or an array index.
type pathSeg struct {
	key   []byte
	index int
	isKey bool
}

// pathString formats the path: "facts[3].attrs".
func (s *keyScan) pathString() string {
	var b strings.Builder
	for _, p := range s.path {
		if p.isKey {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(p.key)
		} else {
			fmt.Fprintf(&b, "[%d]", p.index)
		}
	}
	return b.String()
}

func (s *keyScan) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// errScanStop ends a scan where the input stops making sense.
var errScanStop = errors.New("not JSON the scan can follow")

// value scans one value.
func (s *keyScan) value(depth int) error {
	if depth > maxKeyScanDepth || s.i >= len(s.data) {
		return errScanStop
	}
	switch s.data[s.i] {
	case '{':
		return s.object(depth + 1)
	case '[':
		return s.array(depth + 1)
	case '"':
		raw, err := s.str()
		if err != nil {
			return err
		}
		return s.checkText(raw, "")
	}
	// A number, true, false or null: up to the next delimiter.
	start := s.i
	for s.i < len(s.data) && !strings.ContainsRune(" \t\n\r,:{}[]\"", rune(s.data[s.i])) {
		s.i++
	}
	if s.i == start {
		return errScanStop
	}
	return nil
}

// str scans a string and returns its raw bytes, between the quotes.
func (s *keyScan) str() ([]byte, error) {
	s.i++ // "
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '"':
			s.i++
			return s.data[start : s.i-1], nil
		case '\\':
			s.i += 2
		default:
			s.i++
		}
	}
	return nil, errScanStop
}

// checkText refuses a string that is not valid text: invalid UTF-8, or an
// escaped UTF-16 surrogate without its pair ("\ud800"). encoding/json
// would replace either with U+FFFD silently, changing what the client
// sent; the answer names the field (what names it: "a key" of the object
// at the path, or the value at the path).
func (s *keyScan) checkText(raw []byte, what string) error {
	reason := ""
	if !utf8.Valid(raw) {
		reason = "is not valid UTF-8"
	} else if loneSurrogate(raw) {
		reason = "holds an unpaired UTF-16 surrogate escape (\\ud800-\\udfff)"
	}
	if reason == "" {
		return nil
	}
	field := s.pathString()
	switch {
	case field == "" && what == "":
		field = "body"
	case field == "":
		field = what
	case what != "":
		field += ": " + what
	}
	return errorf(http.StatusBadRequest, codeInvalidRequest, "%s: %s", truncate(field, 128), reason)
}

// loneSurrogate reports an escaped high surrogate not followed by an
// escaped low one, or a low one alone, in a JSON string's raw bytes.
func loneSurrogate(raw []byte) bool {
	pendingHigh := false
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			if pendingHigh {
				return true
			}
			continue
		}
		if raw[i+1] != 'u' || i+6 > len(raw) {
			if pendingHigh {
				return true
			}
			i++ // another escape: skip its letter
			continue
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		i += 5
		if err != nil {
			continue // the decoder refuses it
		}
		switch {
		case n >= 0xD800 && n <= 0xDBFF:
			if pendingHigh {
				return true
			}
			pendingHigh = true
		case n >= 0xDC00 && n <= 0xDFFF:
			if !pendingHigh {
				return true
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return true
			}
		}
	}
	return pendingHigh
}

// keyScanMax is how many keys of one object are compared one by one;
// past it they go in a map.
const keyScanMax = 16

func (s *keyScan) object(depth int) error {
	s.i++ // {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	first := len(s.keys)
	defer func() { s.keys = s.keys[:first] }()
	var set map[string]struct{}
	for {
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return errScanStop
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.checkText(key, "a key"); err != nil {
			return err
		}
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			// Compare as decoded: escapes resolved, invalid UTF-8 as
			// U+FFFD, as encoding/json reads it.
			var k string
			if json.Unmarshal(s.data[s.i-len(key)-2:s.i], &k) != nil {
				return errScanStop
			}
			key = []byte(k)
		}
		seen := false
		if set != nil {
			_, seen = set[string(key)]
		} else {
			for _, k := range s.keys[first:] {
				if bytes.Equal(k, key) {
					seen = true
					break
				}
			}
		}
		if seen {
			where := ""
			if p := s.pathString(); p != "" {
				where = " in " + truncate(p, 128)
			}
			return errorf(http.StatusBadRequest, codeInvalidJSON, "key %q is given twice%s", truncate(string(key), 64), where)
		}
		switch {
		case set != nil:
			set[string(key)] = struct{}{}
		case len(s.keys)-first < keyScanMax:
			s.keys = append(s.keys, key)
		default:
			set = make(map[string]struct{}, 2*keyScanMax)
			for _, k := range s.keys[first:] {
				set[string(k)] = struct{}{}
			}
			set[string(key)] = struct{}{}
		}
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return errScanStop
		}
		s.i++
		s.space()
		s.path = append(s.path, pathSeg{key: key, isKey: true})
		err = s.value(depth)
		s.path = s.path[:len(s.path)-1]
		if err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.data) {
			return errScanStop
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errScanStop
		}
	}
}

func (s *keyScan) array(depth int) error {
	s.i++ // [
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	for n := 0; ; n++ {
		s.space()
		s.path = append(s.path, pathSeg{index: n})
		err := s.value(depth)
		s.path = s.path[:len(s.path)-1]
		if err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.data) {
			return errScanStop
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return errScanStop
		}
	}
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
