package commitlayer

import "slices"

// Remedy is what to do next about a finding.
type Remedy string

const (
	// RemedyRetryRead: the answer may change on its own; read the sources
	// again (a recheck) once they report or after settlement.
	RemedyRetryRead Remedy = "retry_read"
	// RemedyHumanReview: a person should look first; nothing automatic is safe.
	RemedyHumanReview Remedy = "human_review"
	// RemedyCompensate: an effect happened that must be undone or made good.
	RemedyCompensate Remedy = "compensate"
	RemedyNone       Remedy = "none" // nothing to do
)

// Remedies lists every remedy, in documentation order.
var Remedies = []Remedy{RemedyRetryRead, RemedyHumanReview, RemedyCompensate, RemedyNone}

// Valid reports whether r is one of Remedies.
func (r Remedy) Valid() bool { return slices.Contains(Remedies, r) }

// hints is the default remedy per finding code: a missing effect may still
// arrive (someone decides), a duplicate or forbidden one must be undone, and
// an unread source or no signal yet is resolved by reading again.
var hints = map[Code]Remedy{
	CodeMissingEffect:     RemedyHumanReview,
	CodeDuplicateEffect:   RemedyCompensate,
	CodeForbiddenEffect:   RemedyCompensate,
	CodeEffectDiffers:     RemedyHumanReview,
	CodeEffectReversed:    RemedyHumanReview,
	CodePolicyViolation:   RemedyHumanReview,
	CodeLimitExceeded:     RemedyCompensate,
	CodeSourceUnavailable: RemedyRetryRead,
	CodeNoSignal:          RemedyRetryRead,
}

// Hint returns the default remedy for a finding code; an unknown code
// gets human_review, the safe answer when nothing is known.
func Hint(code Code) Remedy {
	if r, ok := hints[code]; ok {
		return r
	}
	return RemedyHumanReview
}

// HintFor returns the remedy for a finding of code on a check: its valid
// override (check id → a contract's `remedy:`), else Hint(code).
func HintFor(code Code, check string, overrides map[string]Remedy) Remedy {
	if r, ok := overrides[check]; ok && r.Valid() {
		return r
	}
	return Hint(code)
}
