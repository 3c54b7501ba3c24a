package api

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/service"
)

// actionIn is an action on the wire. RequestedAt is nil when absent or
// null (the server sets it); a value present is checked, even "" or year 1.
type actionIn struct {
	ID              string            `json:"id"`
	Contract        string            `json:"contract"`
	ContractVersion int               `json:"contract_version"`
	Agent           string            `json:"agent"`
	Subject         string            `json:"subject"`
	Params          commitlayer.Attrs `json:"params"`
	RequestedAt     *string           `json:"requested_at"`
	Claim           *claimIn          `json:"claim"`
	Trace           jsontext.Value    `json:"trace"`
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

// minTime is the earliest requested_at or occurred_at accepted: the Unix
// epoch. A zero time (year 1) is "unset" inside the service, so it must
// never arrive from a client as a value.
var minTime = service.EarliestTime

// decodeAction reads and validates an action; a requested_at after bound
// (the server's clock plus the allowed skew, as for facts) is refused.
// Validation that needs the contract happens in the handler.
func decodeAction(body io.Reader, bound futureBound) (actionRequest, error) {
	var in actionIn
	if err := decodeJSON(body, &in); err != nil {
		return actionRequest{}, err
	}
	bad := func(err error) error { return errorf(http.StatusBadRequest, codeInvalidRequest, "%s", err.Error()) }
	a := commitlayer.Action{
		ID: in.ID, Contract: in.Contract, ContractVersion: in.ContractVersion,
		Agent: in.Agent, Subject: commitlayer.Subject(in.Subject), Params: in.Params, Trace: []byte(in.Trace),
	}
	if in.RequestedAt != nil {
		t, err := parseTime(*in.RequestedAt)
		if err == nil {
			err = bound.check(t)
		}
		if err != nil {
			return actionRequest{}, bad(fmt.Errorf("requested_at: %w", err))
		}
		a.RequestedAt = t
	}
	if in.Claim != nil {
		a.Claim = commitlayer.Claim{Status: in.Claim.Status, Message: in.Claim.Message}
	}
	if err := checkAction(&a, bound); err != nil {
		return actionRequest{}, bad(err)
	}

	// The canonical form: decoded values re-encoded (object keys sorted,
	// numbers normalized, whitespace gone, and escaped as encoding/json
	// escapes, so that hashes stored before stay valid), with requested_at
	// only when the client gave it, so a retry of the same request hashes
	// the same.
	canon, err := json.Marshal(struct {
		ID              string         `json:"id"`
		Contract        string         `json:"contract"`
		ContractVersion int            `json:"contract_version"`
		Agent           string         `json:"agent"`
		Subject         string         `json:"subject"`
		Params          map[string]any `json:"params"`
		RequestedAt     string         `json:"requested_at"`
		Claim           claimIn        `json:"claim"`
		Trace           jsontext.Value `json:"trace,omitempty"`
	}{a.ID, a.Contract, a.ContractVersion, a.Agent, string(a.Subject), a.Params,
		formatTime(a.RequestedAt), claimIn(a.Claim), jsontext.Value(a.Trace)}, canonical)
	if err != nil {
		return actionRequest{}, fmt.Errorf("canonical action: %w", err)
	}
	sum := sha256.Sum256(canon)
	return actionRequest{Action: a, Hash: sum[:]}, nil
}

// canonical are the options of a canonical encoding.
var canonical = json.JoinOptions(json.Deterministic(true), jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true))

// checkAction normalizes what a body or a span brought (params, the trace
// re-encoded canonically) and holds the action to the rules every action
// obeys (service.CheckAction), requested_at within bound (zero: left to the
// server). Its errors read "field: reason".
func checkAction(a *commitlayer.Action, bound futureBound) error {
	if a.ContractVersion < 0 {
		return errors.New("contract_version: must be positive (or absent for the latest)")
	}
	params, err := a.Params.Normalize()
	if err != nil {
		return fmt.Errorf("params: %w", err)
	}
	if params == nil {
		params = commitlayer.Attrs{}
	}
	a.Params = params
	if a.Trace, err = canonicalTrace(a.Trace); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	check := *a
	if check.RequestedAt.IsZero() {
		check.RequestedAt = minTime
	}
	return service.CheckAction(check, bound.Latest)
}

// canonicalTrace checks that a trace is an array (or absent) and re-encodes
// it canonically, its numbers as they were written.
func canonicalTrace(raw []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var v []any
	if err := json.Unmarshal(raw, &v, keepNumbers); err != nil {
		return nil, errors.New("must be an array")
	}
	if at, ok := nulAt(v); ok {
		return nil, fmt.Errorf("%s: contains a NUL character", strings.TrimPrefix(at, "."))
	}
	return json.Marshal(v, canonical)
}

// keepNumbers decodes a number in an any as its text.
var keepNumbers = json.WithUnmarshalers(json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *any) error {
	if dec.PeekKind() != '0' {
		return json.SkipFunc
	}
	raw, err := dec.ReadValue()
	*v = raw.Clone()
	return err
}))
