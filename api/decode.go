package api

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/commitlayer/commitlayer"
)

// decodeJSON decodes exactly one JSON value strictly: a name given twice
// (encoding/json keeps the last silently, while a proxy or signature check
// in front may have read the first), invalid UTF-8, a name in another case,
// an unknown field and trailing data are refused. Errors are *apiError
// naming the field.
func decodeJSON(body io.Reader, dst any) error {
	if err := json.UnmarshalRead(body, dst, json.RejectUnknownMembers(true)); err != nil {
		return jsonError(err)
	}
	return nil
}

func jsonError(err error) *apiError {
	var (
		maxErr *http.MaxBytesError
		syn    *jsontext.SyntacticError
		sem    *json.SemanticError
	)
	bad := func(code, format string, args ...any) *apiError {
		return errorf(http.StatusBadRequest, code, format, args...)
	}
	switch {
	case errors.As(err, &maxErr):
		return errorf(http.StatusRequestEntityTooLarge, codeTooLarge, "body is larger than %d bytes", maxErr.Limit)
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		where := ""
		if p := syn.JSONPointer.Parent(); p != "" {
			where = " in " + fieldOf(p, "")
		}
		return bad(codeInvalidJSON, "key %q is given twice%s", commitlayer.Clip(syn.JSONPointer.LastToken(), 64), where)
	case errors.As(err, &syn) && errors.Is(syn.Err, io.ErrUnexpectedEOF) && syn.ByteOffset == 0:
		return bad(codeInvalidJSON, "body is empty; a JSON object is expected")
	case errors.As(err, &syn) && errors.Is(syn.Err, io.ErrUnexpectedEOF):
		return bad(codeInvalidJSON, "body is truncated JSON")
	case errors.As(err, &syn):
		return bad(codeInvalidJSON, "%s: %s (at byte %d)", fieldOf(syn.JSONPointer, "body"), syn.Err, syn.ByteOffset)
	case errors.As(err, &sem) && errors.Is(sem.Err, json.ErrUnknownName):
		where := ""
		if p := sem.JSONPointer.Parent(); p != "" {
			where = fieldOf(p, "") + ": "
		}
		return bad(codeInvalidRequest, "%sunknown field %q", where, commitlayer.Clip(sem.JSONPointer.LastToken(), 64))
	case errors.As(err, &sem) && sem.JSONKind != 0 && sem.JSONPointer == "":
		return bad(codeInvalidRequest, "body must be a JSON object, not %s", cmp.Or(kindNames[sem.JSONKind], "null"))
	case errors.As(err, &sem) && sem.JSONKind != 0:
		return bad(codeInvalidRequest, "%s: expected %s, got %s", fieldOf(sem.JSONPointer, "body"), typeName(sem.GoType), cmp.Or(kindNames[sem.JSONKind], "null"))
	case errors.As(err, &sem) && sem.Err != nil:
		return bad(codeInvalidRequest, "%s: %s", fieldOf(sem.JSONPointer, "body"), sem.Err)
	}
	return bad(codeInvalidRequest, "the body could not be read")
}

// fieldOf names the value at p ("facts[3].attrs"), root for the body.
func fieldOf(p jsontext.Pointer, root string) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 31); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	if b.Len() == 0 {
		return root
	}
	return commitlayer.Clip(b.String(), 128)
}

// kindNames name the JSON kinds ("a string"); null is the rest.
var kindNames = map[jsontext.Kind]string{'"': "a string", '0': "a number", 't': "a boolean", 'f': "a boolean",
	'{': "an object", '[': "an array"}

func typeName(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// parseTime reads an RFC 3339 time, in UTC.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time", commitlayer.Clip(s, 64))
	}
	return t.UTC(), nil
}

// storable reports whether s is PostgreSQL text: UTF-8 without NUL.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// noNUL refuses a NUL, which PostgreSQL text cannot hold (decoded JSON is
// valid UTF-8 already).
func noNUL(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s: contains a NUL character", field)
	}
	return nil
}

// nulAt is the path below v to a NUL in its strings or keys.
func nulAt(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return "", strings.IndexByte(x, 0) >= 0
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 {
				return " key", true
			}
			if at, ok := nulAt(e); ok {
				return "." + k + at, true
			}
		}
	case []any:
		for i, e := range x {
			if at, ok := nulAt(e); ok {
				return "[" + strconv.Itoa(i) + "]" + at, true
			}
		}
	}
	return "", false
}

// jsonOnly answers 415 to a body labelled as something other than JSON,
// so form data (what `curl -d` sends) is never read as JSON by accident.
// No Content-Type at all is taken as JSON.
func jsonOnly(next handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONMediaType(ct) {
			w.Header().Set("Accept-Post", "application/json")
			return errorf(http.StatusUnsupportedMediaType, codeUnsupportedMediaType,
				"Content-Type %q is not JSON; send application/json", commitlayer.Clip(ct, 64))
		}
		return next(w, r)
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
