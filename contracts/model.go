// Package contracts is CommitLayer's contract language and verification
// engine: Parse loads and compiles a contract (YAML or JSON, predicates in
// CEL); Evaluate turns (contract, action, facts, coverage, now) into a
// commitlayer.Verdict. It is pure: no I/O, no clock, no specific source.
package contracts

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// ContractKind says how a contract treats the absence of any signal.
type ContractKind string

const (
	// KindAction: an action an agent asserted. With its sources connected,
	// no effect at all is a FAIL naming every missing effect.
	KindAction ContractKind = "action"
	// KindOutcome: a claimed outcome that may be invisible to the connected
	// sources. No fact of any effect's kind at all is UNKNOWN (no_signal).
	KindOutcome ContractKind = "outcome"
)

// Per says whose actions a limit adds up.
type Per string

const (
	PerAgent   Per = "agent"
	PerSubject Per = "subject"
)

// Spec is the contract as written; a zero Effect.Count means "at least
// one, no upper bound".
type Spec struct {
	ID          string       `json:"id"`
	Kind        ContractKind `json:"kind"`
	Description string       `json:"description,omitempty"`
	Subject     string       `json:"subject,omitempty"`
	Settlement  Duration     `json:"settlement"`
	Watch       Duration     `json:"watch"`
	Sources     []string     `json:"sources"`
	Policy      []Rule       `json:"policy,omitempty"`
	Limits      []Limit      `json:"limits,omitempty"`
	Effects     []Effect     `json:"effects,omitempty"`
	Forbids     []Forbid     `json:"forbids,omitempty"`
	// Bindings say which tool calls record an action; Evaluate never reads them.
	Bindings []Binding `json:"bindings,omitempty"`
}

// Rule is a policy predicate over params, action and state.
type Rule struct {
	ID      string             `json:"id"`
	Rule    string             `json:"rule"`
	Message string             `json:"message,omitempty"`
	Remedy  commitlayer.Remedy `json:"remedy,omitempty"` // overrides the code's default hint
}

// Limit bounds the sum (or count) of one effect's matched facts over the
// actions of one agent (or on one subject) in a window.
type Limit struct {
	ID     string             `json:"id"`
	Per    Per                `json:"per"`
	Window Duration           `json:"window"`
	Effect string             `json:"effect"`
	Sum    string             `json:"sum,omitempty"`
	Count  bool               `json:"count,omitempty"`
	Max    int64              `json:"max"`
	Remedy commitlayer.Remedy `json:"remedy,omitempty"` // overrides the code's default hint
}

// Effect is a fact the action must produce.
type Effect struct {
	ID         string             `json:"id"`
	Source     string             `json:"source"`
	Type       string             `json:"type"`
	Where      string             `json:"where,omitempty"`
	Count      int                `json:"count,omitempty"`
	Expect     string             `json:"expect,omitempty"`
	ReversedBy *Reversal          `json:"reversed_by,omitempty"`
	Orphans    *bool              `json:"orphans,omitempty"` // false keeps its facts out of Orphans; nil is true
	Remedy     commitlayer.Remedy `json:"remedy,omitempty"`  // overrides the code's default hint
}

// ReportsOrphans reports whether facts matching e can be orphans.
func (e *Effect) ReportsOrphans() bool { return e.Orphans == nil || *e.Orphans }

// Reversal is a later fact that undoes a matched effect. In its Where,
// `effect` is the reversal's attrs and `original` the matched effect's.
type Reversal struct {
	Source string `json:"source"`
	Type   string `json:"type"`
	Where  string `json:"where,omitempty"`
}

// Forbid is a fact the action must not produce.
type Forbid struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Type   string `json:"type"`
	Where  string `json:"where,omitempty"`
	// Through, when set, is a subject type ("customer"): the forbid also reads
	// facts one hop from such a subject in the action's subject set.
	Through string `json:"through,omitempty"`
	// LinksFrom names the sources whose facts link the hub to the subjects
	// it reaches: with one unreadable and nothing forbidden found, the
	// policy lens is UNKNOWN (the missing links may lead to a forbidden fact).
	LinksFrom []string           `json:"links_from,omitempty"`
	Orphans   *bool              `json:"orphans,omitempty"` // false keeps its facts out of Orphans; nil is true
	Remedy    commitlayer.Remedy `json:"remedy,omitempty"`  // overrides the code's default hint
}

// ReportsOrphans reports whether facts matching f can be orphans.
func (f *Forbid) ReportsOrphans() bool { return f.Orphans == nil || *f.Orphans }

// Duration is a time.Duration written in Go syntax with an optional leading
// whole or decimal day count: "10m", "72h", "3d", "1d12h".
type Duration time.Duration

// maxDuration bounds every contract duration (ten years), so adding
// settlement, watch and windows to a timestamp never overflows.
const maxDuration = 3650 * 24 * time.Hour

// ParseDuration reads Go duration syntax with an optional leading day count.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil || i == 0 || strings.ContainsAny(s[:i], "eE+-_xXpPnN") {
			return 0, fmt.Errorf("duration %q: %q is not a day count", s, s[:i+1])
		}
		if n > maxDuration.Hours()/24 {
			return 0, fmt.Errorf("duration %q is longer than %d days", s, int(maxDuration.Hours()/24))
		}
		days = time.Duration(math.Round(n * float64(24*time.Hour)))
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
		if s[0] == '-' || s[0] == '+' {
			return 0, fmt.Errorf("duration: sign after the day count")
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration: %w", err)
	}
	if d > maxDuration || d < -maxDuration || days+d > maxDuration {
		return 0, fmt.Errorf("duration %q is longer than %d days", s, int(maxDuration.Hours()/24))
	}
	return days + d, nil
}

// String writes whole days as "3d" and anything else in Go syntax.
func (d Duration) String() string {
	td := time.Duration(d)
	if td > 0 && td%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(td/(24*time.Hour)), 10) + "d"
	}
	return td.String()
}

// MarshalText writes String, so a Spec round-trips through JSON.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads what ParseDuration reads.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
