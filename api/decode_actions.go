package api

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/service"
)

// actionIn is an action on the wire; RequestedAt is nil when absent or
// null (the server sets it).
type actionIn struct {
	ID              string            `json:"id"`
	Contract        string            `json:"contract"`
	ContractVersion int               `json:"contract_version"`
	Agent           string            `json:"agent"`
	Subject         string            `json:"subject"`
	Params          commitlayer.Attrs `json:"params"`
	RequestedAt     *string           `json:"requested_at"`
	Claim           commitlayer.Claim `json:"claim"`
	Trace           jsontext.Value    `json:"trace"`
}

// claimIn is a claim in the canonical form (message never omitted).
type claimIn struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// actionRequest is a validated action and its canonical form's hash (for
// idempotency).
type actionRequest struct {
	Action commitlayer.Action
	Hash   []byte
}

// minTime is the earliest time accepted: year 1 means "unset" inside the
// service, so it must never arrive from a client.
var minTime = service.EarliestTime

// decodeAction reads and normalizes an action and holds it to
// service.CheckAction; checks needing the contract are service.Actions'.
func decodeAction(body io.Reader, bound futureBound) (actionRequest, error) {
	var in actionIn
	if err := decodeJSON(body, &in); err != nil {
		return actionRequest{}, err
	}
	bad := func(format string, args ...any) (actionRequest, error) {
		return actionRequest{}, errorf(http.StatusBadRequest, codeInvalidRequest, format, args...)
	}
	a := commitlayer.Action{
		ID: in.ID, Contract: in.Contract, ContractVersion: in.ContractVersion, Agent: in.Agent,
		Subject: commitlayer.Subject(in.Subject), Claim: in.Claim,
	}
	var err error
	if in.RequestedAt != nil {
		if a.RequestedAt, err = parseTime(*in.RequestedAt); err == nil {
			err = bound.check(a.RequestedAt)
		}
		if err != nil {
			return bad("requested_at: %s", err)
		}
	}
	if a.ContractVersion < 0 {
		return bad("contract_version: must be positive (or absent for the latest)")
	}
	if a.Params, err = in.Params.Normalize(); err != nil {
		return bad("params: %s", err)
	} else if a.Params == nil {
		a.Params = commitlayer.Attrs{}
	}
	if a.Trace, err = canonicalTrace(in.Trace); err != nil {
		return bad("trace: %s", err)
	}
	check := a
	if check.RequestedAt.IsZero() {
		check.RequestedAt = minTime // left to the server
	}
	if err := service.CheckAction(check, bound.Latest); err != nil {
		return bad("%s", err)
	}
	requestedAt := ""
	if !a.RequestedAt.IsZero() {
		requestedAt = a.RequestedAt.UTC().Format(time.RFC3339Nano)
	}

	// Canonical: keys sorted, numbers normalized, escaped as encoding/json
	// escapes (so stored hashes stay valid), requested_at only when given
	// (so a retry hashes the same).
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
		requestedAt, claimIn(a.Claim), jsontext.Value(a.Trace)}, canonical)
	if err != nil {
		return actionRequest{}, fmt.Errorf("canonical action: %w", err)
	}
	sum := sha256.Sum256(canon)
	return actionRequest{Action: a, Hash: sum[:]}, nil
}

var canonical = json.JoinOptions(json.Deterministic(true), jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true))

// canonicalTrace re-encodes an array trace (or none) canonically, its
// numbers as written.
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
