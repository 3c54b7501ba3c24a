package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/commitlayer/commitlayer"
)

// decodeJSON decodes exactly one JSON value from body into dst, rejecting
// unknown fields, keys given twice and trailing data. Numbers in untyped
// (any) fields stay json.Number, so attrs and params keep exact integers.
// Errors are *apiError: 413 for a body over its http.MaxBytesReader limit,
// 400 invalid_json for malformed JSON or a key given twice, 400
// invalid_request for a value of the wrong type or an unknown field.
func decodeJSON(body io.Reader, dst any) error {
	data, err := readBody(body)
	if err != nil {
		return err
	}
	if err := checkDuplicateKeys(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	// Exactly one value: anything but whitespace after it is an error.
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return errorf(http.StatusBadRequest, codeInvalidJSON, "body holds more than one JSON value")
	default:
		return jsonError(err)
	}
}

// jsonError maps a decoding error to the client's error.
func jsonError(err error) *apiError { return jsonErrorAt("", err) }

// jsonErrorAt maps a decoding error of the value at path ("facts[3]"; ""
// for the body) to the client's error.
func jsonErrorAt(path string, err error) *apiError {
	join := func(field string) string {
		switch {
		case path == "":
			return field
		case field == "":
			return path
		}
		return path + "." + field
	}
	var (
		maxErr    *http.MaxBytesError
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxErr):
		return errorf(http.StatusRequestEntityTooLarge, codeTooLarge, "body is larger than %d bytes", maxErr.Limit)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, codeInvalidJSON, "body is empty; a JSON object is expected")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, codeInvalidJSON, "body is truncated JSON")
	case errors.As(err, &syntaxErr):
		return errorf(http.StatusBadRequest, codeInvalidJSON, "malformed JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	case errors.As(err, &typeErr):
		field := join(typeErr.Field)
		if field == "" {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "body must be a JSON object, not %s", typeErr.Value)
		}
		return errorf(http.StatusBadRequest, codeInvalidRequest, "%s: expected %s, got %s", field, jsonTypeName(typeErr.Type.String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if path != "" {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "%s: unknown field %s", path, name)
		}
		return errorf(http.StatusBadRequest, codeInvalidRequest, "unknown field %s", name)
	default:
		// Other decoding errors come from the client's bytes (an invalid
		// escape, a number out of range in attrs); their text names them.
		return errorf(http.StatusBadRequest, codeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// jsonTypeName names a Go type the way an API user thinks of it.
func jsonTypeName(goType string) string {
	switch {
	case goType == "string" || goType == "commitlayer.Subject":
		return "a string"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	default:
		return "an object"
	}
}

// decodeAttrs checks a decoded attrs or params value (absent or null is
// empty) and normalizes it: integers exact, money in minor units.
func decodeAttrs(v any) (commitlayer.Attrs, error) {
	if v == nil {
		return commitlayer.Attrs{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("must be an object")
	}
	n, err := commitlayer.NormalizeValue(m)
	if err != nil {
		return nil, err
	}
	a := n.(map[string]any)
	if err := valueNoNUL("", a); err != nil {
		return nil, err
	}
	return commitlayer.Attrs(a), nil
}

// parseTime reads an RFC 3339 time, in UTC.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time", truncate(s, 64))
	}
	return t.UTC(), nil
}

// storable reports whether s can be stored as PostgreSQL text: valid UTF-8
// without NUL. Path and query values need the check; JSON strings are
// already valid UTF-8.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// noNUL rejects text PostgreSQL cannot hold: a NUL character, or bytes
// that are not UTF-8 (a protobuf string may hold either).
func noNUL(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s: contains a NUL character", field)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s: is not UTF-8 text", field)
	}
	return nil
}

// valueNoNUL checks the strings and keys of a normalized value.
func valueNoNUL(path string, v any) error {
	switch x := v.(type) {
	case string:
		return noNUL(pathOr(path), x)
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if err := noNUL(pathOr(path)+" key", k); err != nil {
				return err
			}
			if err := valueNoNUL(p, e); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := valueNoNUL(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func pathOr(path string) string {
	if path == "" {
		return "value"
	}
	return path
}

// truncate cuts a client's value for a message at a rune boundary
// (commitlayer.Clip, shared with the store and the domain).
func truncate(s string, n int) string { return commitlayer.Clip(s, n) }

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
