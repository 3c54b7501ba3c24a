// Package commitlayer holds CommitLayer's domain: what an agent says it did
// (Action), what the systems of record say happened (Fact), and the answer
// (Verdict, made of Findings). It imports no SDK; adapters live in packages
// named after what they adapt (postgres, api, sandbox, workflows).
package commitlayer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is a verdict or lens result.
type Status string

const (
	StatusPass    Status = "PASS"
	StatusFail    Status = "FAIL"
	StatusUnknown Status = "UNKNOWN"
)

// severity orders statuses: FAIL > UNKNOWN > PASS (and anything else).
var severity = map[Status]int{StatusUnknown: 1, StatusFail: 2}

// Worse returns the more severe of two statuses (FAIL > UNKNOWN > PASS).
func Worse(a, b Status) Status {
	if severity[b] > severity[a] {
		return b
	}
	return a
}

// Valid reports whether s is one of the three statuses.
func (s Status) Valid() bool {
	return s == StatusPass || s == StatusFail || s == StatusUnknown
}

// Lens is the question a finding answers.
type Lens string

const (
	LensOutcome Lens = "outcome" // did the claimed effects happen, once, as requested, and stay done?
	LensPolicy  Lens = "policy"  // was the action allowed (eligibility, limits, forbidden side effects)?
)

// Code names the kind of a finding.
type Code string

const (
	CodeMissingEffect     Code = "missing_effect"
	CodeDuplicateEffect   Code = "duplicate_effect"
	CodeForbiddenEffect   Code = "forbidden_effect"
	CodeEffectDiffers     Code = "effect_differs"
	CodeEffectReversed    Code = "effect_reversed"
	CodePolicyViolation   Code = "policy_violation"
	CodeLimitExceeded     Code = "limit_exceeded"
	CodeSourceUnavailable Code = "source_unavailable"
	CodeNoSignal          Code = "no_signal"
)

// Codes lists every finding code, in documentation order.
var Codes = []Code{
	CodeMissingEffect, CodeDuplicateEffect, CodeForbiddenEffect, CodeEffectDiffers,
	CodeEffectReversed, CodePolicyViolation, CodeLimitExceeded, CodeSourceUnavailable,
	CodeNoSignal,
}

// Subject names a record in a system of record as "type:id" ("order:o_1001").
type Subject string

// ParseSubject checks that s is "type:id", type of [a-z0-9_]+, id non-empty without whitespace.
func ParseSubject(s string) (Subject, error) {
	if len(s) > MaxSubjectLen {
		return "", fmt.Errorf("subject %q is longer than %d bytes", Clip(s, 32), MaxSubjectLen)
	}
	typ, id, ok := strings.Cut(s, ":")
	if !ok || typ == "" || id == "" {
		return "", fmt.Errorf("subject %q is not of the form type:id", s)
	}
	if strings.IndexFunc(typ, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') }) >= 0 {
		return "", fmt.Errorf("subject %q: type %q may only hold a-z, 0-9 and _", s, typ)
	}
	if strings.ContainsAny(id, " \t\r\n") {
		return "", fmt.Errorf("subject %q: id contains whitespace", s)
	}
	return Subject(s), nil
}

// Type is the part before the colon ("order" in "order:o_1001").
func (s Subject) Type() string {
	t, _, _ := strings.Cut(string(s), ":")
	return t
}

// ID is the part after the colon ("o_1001" in "order:o_1001").
func (s Subject) ID() string {
	_, id, _ := strings.Cut(string(s), ":")
	return id
}

// Fact is one record reported by a system of record, idempotent on (tenant, Source, ExternalID).
type Fact struct {
	Source     string    `json:"source"`
	Type       string    `json:"type"`
	Subject    Subject   `json:"subject"`
	ExternalID string    `json:"external_id"`
	OccurredAt time.Time `json:"occurred_at"`
	Attrs      Attrs     `json:"attrs"`
	// Links ties this fact's subject to others (a ticket to its order):
	// effects on a linked subject count for the action's subject.
	Links []Subject `json:"links,omitempty"`
	// Seq is the store's sequence number; zero until stored.
	Seq int64 `json:"seq,omitzero"`
}

// Validate checks the fields a fact must carry.
func (f *Fact) Validate() error {
	switch {
	case f.Source == "":
		return fieldError("source", "is required")
	case !ValidName(f.Source):
		return fieldError("source", fmt.Sprintf("%q may only hold letters, digits, '_', '-' and '.'", f.Source))
	case f.Type == "":
		return fieldError("type", "is required")
	case f.ExternalID == "":
		return fieldError("external_id", "is required")
	case len(f.ExternalID) > 512:
		return fieldError("external_id", "is longer than 512 bytes")
	case f.OccurredAt.IsZero():
		return fieldError("occurred_at", "is required (RFC 3339)")
	}
	if _, err := ParseSubject(string(f.Subject)); err != nil {
		return fieldError("subject", err.Error())
	}
	for i, l := range f.Links {
		if _, err := ParseSubject(string(l)); err != nil {
			return fieldError(fmt.Sprintf("links[%d]", i), err.Error())
		}
	}
	return nil
}

// Claim is what the agent reported about its own action.
type Claim struct {
	Status  string `json:"status"` // "success", "failure", …
	Message string `json:"message,omitempty"`
}

// Claim statuses. The engine contradicts success and failure; partial and
// unknown are kept as given; an absent claim is "".
const (
	ClaimSuccess = "success"
	ClaimFailure = "failure"
	ClaimPartial = "partial"
	ClaimUnknown = "unknown"
)

// ClaimStatuses lists the claim statuses the API accepts besides "".
var ClaimStatuses = []string{ClaimSuccess, ClaimFailure, ClaimPartial, ClaimUnknown}

// Bounds of the action fields that reach a verification's workflow ID and
// search attributes, checked by Validate: Temporal refuses a keyword over
// 2048 bytes, and a start it refuses would never run.
const (
	MaxActionIDLen = 128
	MaxContractLen = 128
	MaxAgentLen    = 256
	MaxSubjectLen  = 256
)

// Action is what an agent (or the platform running it) says it did.
type Action struct {
	ID              string          `json:"id"`
	Contract        string          `json:"contract"`
	ContractVersion int             `json:"contract_version,omitempty"`
	Agent           string          `json:"agent"`
	Subject         Subject         `json:"subject"`
	Params          Attrs           `json:"params"`
	RequestedAt     time.Time       `json:"requested_at"`
	Claim           Claim           `json:"claim"`
	Trace           json.RawMessage `json:"trace,omitempty"`
}

// Validate checks the fields an action must carry (RequestedAt included).
func (a *Action) Validate() error {
	switch {
	case a.Contract == "":
		return fieldError("contract", "is required")
	case len(a.Contract) > MaxContractLen:
		return fieldError("contract", fmt.Sprintf("is longer than %d bytes", MaxContractLen))
	case a.Agent == "":
		return fieldError("agent", "is required")
	case len(a.Agent) > MaxAgentLen:
		return fieldError("agent", fmt.Sprintf("is longer than %d bytes", MaxAgentLen))
	case a.RequestedAt.IsZero():
		return fieldError("requested_at", "is required (RFC 3339)")
	case len(a.ID) > MaxActionIDLen:
		return fieldError("id", fmt.Sprintf("is longer than %d bytes", MaxActionIDLen))
	}
	if a.ID != "" && !ValidName(a.ID) {
		return fieldError("id", fmt.Sprintf("%q may only hold letters, digits, '_', '-' and '.'", a.ID))
	}
	if _, err := ParseSubject(string(a.Subject)); err != nil {
		return fieldError("subject", err.Error())
	}
	return nil
}

// Lenses holds the result of each lens.
type Lenses struct {
	Outcome Status `json:"outcome"`
	Policy  Status `json:"policy"`
}

// Get returns the status of one lens.
func (l Lenses) Get(lens Lens) Status {
	if lens == LensPolicy {
		return l.Policy
	}
	return l.Outcome
}

// Finding is one reason behind a verdict.
type Finding struct {
	Code    Code   `json:"code"`
	Check   string `json:"check"` // the contract check id: an effect, rule, limit or forbid
	Lens    Lens   `json:"lens"`
	Message string `json:"message"`
	// Facts are the external ids of the facts involved.
	Facts []string `json:"facts"`
	// Hint is what to do next (HintFor); empty in verdicts stored before
	// hints existed, where Hint(Code) stands for it.
	Hint Remedy `json:"hint,omitempty"`
}

// Verdict is CommitLayer's answer for one action at one point in time.
type Verdict struct {
	ActionID           string    `json:"action_id"`
	Contract           string    `json:"contract,omitempty"`
	ContractVersion    int       `json:"contract_version,omitempty"`
	Status             Status    `json:"status"`
	Provisional        bool      `json:"provisional"`
	Lenses             Lenses    `json:"lenses"`
	Findings           []Finding `json:"findings"`
	UnavailableSources []string  `json:"unavailable_sources"`
	ClaimContradicted  bool      `json:"claim_contradicted"`
	EvaluatedAt        time.Time `json:"evaluated_at"`
	SettlesAt          time.Time `json:"settles_at"`
	// Version counts verdict changes for the action, from 1; the store
	// assigns it (the engine leaves it zero).
	Version int `json:"version"`
}

// SameAnswer reports whether two verdicts say the same thing (status,
// lenses, provisional, claim, findings' code, check, lens and message,
// unavailable sources): a verdict version is recorded only when it changes.
func (v Verdict) SameAnswer(o Verdict) bool {
	sameFinding := func(a, b Finding) bool {
		return a.Code == b.Code && a.Check == b.Check && a.Lens == b.Lens && a.Message == b.Message
	}
	return v.Status == o.Status && v.Provisional == o.Provisional && v.Lenses == o.Lenses &&
		v.ClaimContradicted == o.ClaimContradicted && slices.EqualFunc(v.Findings, o.Findings, sameFinding) &&
		slices.Equal(v.UnavailableSources, o.UnavailableSources)
}

// Summary says the verdict in words, for logs and the Temporal UI.
func (v Verdict) Summary() string {
	var b strings.Builder
	b.WriteString(string(v.Status))
	if v.Provisional {
		b.WriteString(" (provisional)")
	}
	// Plain writes, not fmt.Fprintf: VerifyAction calls Summary, and
	// workflowcheck cannot prove fmt's writer path deterministic.
	b.WriteString(" outcome=" + string(v.Lenses.Outcome) + " policy=" + string(v.Lenses.Policy))
	for i, f := range v.Findings {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(string(f.Code) + " " + f.Check)
	}
	return b.String()
}

// FieldError is a validation error naming the offending field.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldError(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

// ValidName reports whether s can name a source, a connector's source or a
// client-chosen id: 1 to 128 letters, digits, '_', '-' and '.'.
func ValidName(s string) bool {
	return s != "" && len(s) <= 128 && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}) < 0
}
