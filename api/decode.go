package api

import (
	"bytes"
	"crypto/sha256"
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

// factIn is a fact on the wire. The time is read as a string and attrs as
// any JSON value, so that an error names the fact and the field.
type factIn struct {
	Source     string   `json:"source"`
	Type       string   `json:"type"`
	Subject    string   `json:"subject"`
	ExternalID string   `json:"external_id"`
	OccurredAt string   `json:"occurred_at"`
	Attrs      any      `json:"attrs"`
	Links      []string `json:"links"`
	// Seq is accepted so a fact read back can be posted again; the store
	// assigns its own.
	Seq json.RawMessage `json:"seq"`
}

// decodeFacts reads and validates the body of POST /v1/facts,
// {"facts":[Fact…]}: every fact must pass Fact.Validate, with attrs
// normalized. The first bad fact rejects the batch, named by index and
// field ("facts[3].subject: …"). The array is read one fact at a time, so
// even a JSON type error names the fact. A key given twice anywhere is
// refused (invalid_json), and so is an occurred_at after the bound.
func decodeFacts(body io.Reader, bound futureBound) ([]commitlayer.Fact, error) {
	data, err := readBody(body)
	if err != nil {
		return nil, err
	}
	if err := checkDuplicateKeys(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	bad := func(format string, args ...any) error {
		return errorf(http.StatusBadRequest, codeInvalidRequest, format, args...)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(err)
	}
	if tok != json.Delim('{') {
		return nil, bad("body must be a JSON object {\"facts\": […]}")
	}
	var (
		facts []commitlayer.Fact
		seen  bool
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		if key, _ := tok.(string); key != "facts" {
			return nil, bad("unknown field %q", fmt.Sprint(tok))
		}
		if seen {
			return nil, bad("facts: is given twice")
		}
		seen = true
		if tok, err = dec.Token(); err != nil {
			return nil, jsonError(err)
		}
		switch tok {
		case nil:
			return nil, bad("facts: is required (an array of facts)")
		case json.Delim('['):
		default:
			return nil, bad("facts: expected an array, got %s", jsonKind(tok))
		}
		for i := 0; dec.More(); i++ {
			var in factIn
			if err := dec.Decode(&in); err != nil {
				return nil, jsonErrorAt(fmt.Sprintf("facts[%d]", i), err)
			}
			f, err := in.fact(bound)
			if err != nil {
				return nil, bad("facts[%d].%s", i, err.Error())
			}
			facts = append(facts, f)
		}
		if _, err := dec.Token(); err != nil { // ]
			return nil, jsonError(err)
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, jsonError(err)
	}
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
	case err == nil:
		return nil, errorf(http.StatusBadRequest, codeInvalidJSON, "body holds more than one JSON value")
	default:
		return nil, jsonError(err)
	}
	if !seen {
		return nil, bad("facts: is required (an array of facts)")
	}
	if len(facts) == 0 {
		return nil, bad("facts: at least one fact is required")
	}
	return facts, nil
}

// jsonKind names the JSON kind of a token.
func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('{') {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// futureBound is the latest occurred_at accepted: the server's clock plus
// the allowed skew. The zero bound accepts any time.
type futureBound struct {
	Latest time.Time
	Skew   time.Duration
}

// fact converts and validates, refusing an occurred_at after the bound;
// its errors read "field: reason".
func (in *factIn) fact(bound futureBound) (commitlayer.Fact, error) {
	f := commitlayer.Fact{
		Source:     in.Source,
		Type:       in.Type,
		Subject:    commitlayer.Subject(in.Subject),
		ExternalID: in.ExternalID,
	}
	for _, s := range []struct{ field, v string }{
		{"source", in.Source}, {"type", in.Type}, {"subject", in.Subject}, {"external_id", in.ExternalID},
	} {
		if err := noNUL(s.field, s.v); err != nil {
			return f, err
		}
	}
	if in.OccurredAt != "" {
		t, err := parseTime(in.OccurredAt)
		if err != nil {
			return f, fmt.Errorf("occurred_at: %w", err)
		}
		if !bound.Latest.IsZero() && t.After(bound.Latest) {
			return f, fmt.Errorf("occurred_at: %s is later than %s, the server's clock plus %s",
				t.Format(time.RFC3339Nano), bound.Latest.UTC().Format(time.RFC3339Nano), bound.Skew)
		}
		f.OccurredAt = t
	}
	attrs, err := decodeAttrs(in.Attrs)
	if err != nil {
		return f, fmt.Errorf("attrs: %w", err)
	}
	f.Attrs = attrs
	for i, l := range in.Links {
		if err := noNUL(fmt.Sprintf("links[%d]", i), l); err != nil {
			return f, err
		}
		f.Links = append(f.Links, commitlayer.Subject(l))
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	return f, nil
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

// noNUL rejects a NUL character, which PostgreSQL text cannot hold.
func noNUL(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s: contains a NUL character", field)
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// actionIn is an action on the wire. RequestedAt is nil when absent or
// null (the server sets it); a value present is checked, even "" or year 1.
type actionIn struct {
	ID              string          `json:"id"`
	Contract        string          `json:"contract"`
	ContractVersion int             `json:"contract_version"`
	Agent           string          `json:"agent"`
	Subject         string          `json:"subject"`
	Params          any             `json:"params"`
	RequestedAt     *string         `json:"requested_at"`
	Claim           *claimIn        `json:"claim"`
	Trace           json.RawMessage `json:"trace"`
}

type claimIn struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// actionRequest is a decoded, validated action and the hash of its
// canonical form (for idempotency). RequestedAt is zero when the client
// left it to the server.
type actionRequest struct {
	Action commitlayer.Action
	Hash   []byte
}

// minRequestedAt is the earliest requested_at accepted: the Unix epoch. A
// zero time (year 1) is "unset" inside the service, so it must never
// arrive from a client as a value.
var minRequestedAt = time.Unix(0, 0).UTC()

// decodeAction reads and validates an action. Validation that needs the
// clock (a missing requested_at) or the contract happens in the handler.
func decodeAction(body io.Reader) (actionRequest, error) {
	var in actionIn
	if err := decodeJSON(body, &in); err != nil {
		return actionRequest{}, err
	}
	bad := func(err error) error { return errorf(http.StatusBadRequest, codeInvalidRequest, "%s", err.Error()) }
	for _, s := range []struct{ field, v string }{
		{"id", in.ID}, {"contract", in.Contract}, {"agent", in.Agent}, {"subject", in.Subject},
	} {
		if err := noNUL(s.field, s.v); err != nil {
			return actionRequest{}, bad(err)
		}
	}
	a := commitlayer.Action{
		ID: in.ID, Contract: in.Contract, ContractVersion: in.ContractVersion,
		Agent: in.Agent, Subject: commitlayer.Subject(in.Subject),
	}
	if in.ContractVersion < 0 {
		return actionRequest{}, bad(errors.New("contract_version: must be positive (or absent for the latest)"))
	}
	if in.RequestedAt != nil {
		t, err := parseTime(*in.RequestedAt)
		if err != nil {
			return actionRequest{}, bad(fmt.Errorf("requested_at: %w", err))
		}
		if t.Before(minRequestedAt) {
			return actionRequest{}, bad(fmt.Errorf("requested_at: must be %s or later", minRequestedAt.Format(time.RFC3339)))
		}
		a.RequestedAt = t
	}
	params, err := decodeAttrs(in.Params)
	if err != nil {
		return actionRequest{}, bad(fmt.Errorf("params: %w", err))
	}
	a.Params = params
	if in.Claim != nil {
		if err := noNUL("claim.status", in.Claim.Status); err != nil {
			return actionRequest{}, bad(err)
		}
		if err := noNUL("claim.message", in.Claim.Message); err != nil {
			return actionRequest{}, bad(err)
		}
		a.Claim = commitlayer.Claim{Status: in.Claim.Status, Message: in.Claim.Message}
	}
	trace, err := canonicalTrace(in.Trace)
	if err != nil {
		return actionRequest{}, bad(fmt.Errorf("trace: %w", err))
	}
	a.Trace = trace

	// Validate with a placeholder time when the server will set it, so the
	// other fields are checked here.
	check := a
	if check.RequestedAt.IsZero() {
		check.RequestedAt = time.Unix(0, 0)
	}
	if err := check.Validate(); err != nil {
		return actionRequest{}, bad(err)
	}

	// The canonical form: decoded values re-encoded (object keys sorted,
	// numbers normalized, whitespace gone), with requested_at only when
	// the client gave it, so a retry of the same request hashes the same.
	canon, err := json.Marshal(struct {
		ID              string          `json:"id"`
		Contract        string          `json:"contract"`
		ContractVersion int             `json:"contract_version"`
		Agent           string          `json:"agent"`
		Subject         string          `json:"subject"`
		Params          map[string]any  `json:"params"`
		RequestedAt     string          `json:"requested_at"`
		Claim           claimIn         `json:"claim"`
		Trace           json.RawMessage `json:"trace,omitempty"`
	}{a.ID, a.Contract, a.ContractVersion, a.Agent, string(a.Subject), a.Params,
		formatTime(a.RequestedAt), claimIn(a.Claim), a.Trace})
	if err != nil {
		return actionRequest{}, fmt.Errorf("canonical action: %w", err)
	}
	sum := sha256.Sum256(canon)
	return actionRequest{Action: a, Hash: sum[:]}, nil
}

// canonicalTrace checks that a trace is an array (or absent) and re-encodes
// it with sorted keys and no whitespace.
func canonicalTrace(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '[' {
		return nil, errors.New("must be an array")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v []any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("must be an array")
	}
	if err := valueNoNUL("", v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
