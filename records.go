package commitlayer

import (
	"encoding/json"
	"slices"
	"time"
)

// The records below are what every layer passes around once the store has
// them. The postgres package stores and loads them; the API, the
// activities, the verification client and the sandbox harness take them
// from there without depending on the store.

// Tenant is one customer workspace.
type Tenant struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// ActionRecord is a stored action: the action as recorded (its contract
// version pinned) and the window its verification runs in.
type ActionRecord struct {
	Action
	TenantID   string
	SettlesAt  time.Time
	WatchUntil time.Time
	CreatedAt  time.Time
	// VerificationStartedAt is when its verification was started (zero
	// while pending). VerificationFailedAt is when its start was refused
	// for good (Temporal would never take it), with the reason in
	// VerificationError; such an action is not started again.
	VerificationStartedAt time.Time
	VerificationFailedAt  time.Time
	VerificationError     string
}

// Verification states of an action, as GET /v1/actions/{id} shows them.
const (
	VerificationPending = "pending"
	VerificationStarted = "started"
	VerificationFailed  = "failed"
)

// Verification says where the action's verification is: failed, started
// or pending (recorded, its start left to the reconciler).
func (r ActionRecord) Verification() string {
	switch {
	case !r.VerificationFailedAt.IsZero():
		return VerificationFailed
	case !r.VerificationStartedAt.IsZero():
		return VerificationStarted
	}
	return VerificationPending
}

// ContractRecord is one stored version of a contract.
type ContractRecord struct {
	ID        string
	Version   int
	Source    []byte // YAML or JSON as posted
	CreatedAt time.Time
}

// Connector pulls facts for one source of a tenant; Kind says how
// (http_events, …).
type Connector struct {
	ID, TenantID, Source string
	Kind                 string
	URL                  string
	// Config holds kind-specific settings (JSON); Secret is a credential
	// sealed with the process's secrets key (never in clear), SecretHint
	// what may be shown of it (its last 4).
	Config      json.RawMessage
	Secret      string
	SecretHint  string
	Cursor      string
	LastPullAt  time.Time // last successful pull
	LastError   string
	LastErrorAt time.Time
	CreatedAt   time.Time
}

// SourceCoverage says what the store knows of one source of a tenant.
type SourceCoverage struct {
	Source       string
	EverReported bool
	FactCount    int64
	LastFactAt   time.Time // latest occurred_at among its facts
	LastSeenAt   time.Time // last ingestion: a batch pushed or a successful pull
	ConnectorID  string
	LastError    string
	LastErrorAt  time.Time
}

// SpanRejection is a span of POST /v1/traces that looked like a bound tool
// call but became no action, and why (kept so a team sees it).
type SpanRejection struct {
	At              time.Time
	TraceID, SpanID string
	Tool, Dialect   string
	Message         string
}

// FactType names a kind of fact: a type from a source.
type FactType struct{ Source, Type string }

// FactsDigest says what a batch of facts holds beyond its subjects: each
// kind among them with the earliest time one occurred, and whether any
// links a subject. It is enough for a screen to tell, without reading the
// store, that the batch cannot change a verification's answer
// (contracts.Contract.MayChange): most facts on a watched subject are of a
// kind its contract never reads.
type FactsDigest struct {
	Kinds  []KindSince
	Linked bool
}

// KindSince is one kind of a FactsDigest and the earliest occurred_at of
// its facts.
type KindSince struct {
	FactType
	Earliest time.Time
}

// DigestFacts digests facts; nil when there are none.
func DigestFacts(facts []Fact) *FactsDigest {
	if len(facts) == 0 {
		return nil
	}
	d := &FactsDigest{}
	at := make(map[FactType]int, 4)
	for i := range facts {
		f := &facts[i]
		if len(f.Links) > 0 {
			d.Linked = true
		}
		k := FactType{Source: f.Source, Type: f.Type}
		j, ok := at[k]
		if !ok {
			at[k] = len(d.Kinds)
			d.Kinds = append(d.Kinds, KindSince{FactType: k, Earliest: f.OccurredAt})
			continue
		}
		if f.OccurredAt.Before(d.Kinds[j].Earliest) {
			d.Kinds[j].Earliest = f.OccurredAt
		}
	}
	return d
}

// Join returns the digest of d's facts and o's together (a nil one holds
// none here); d and o are left as they are.
func (d *FactsDigest) Join(o *FactsDigest) *FactsDigest {
	out := &FactsDigest{}
	for _, x := range []*FactsDigest{d, o} {
		if x == nil {
			continue
		}
		out.Linked = out.Linked || x.Linked
		for _, k := range x.Kinds {
			j := slices.IndexFunc(out.Kinds, func(o KindSince) bool { return o.FactType == k.FactType })
			switch {
			case j < 0:
				out.Kinds = append(out.Kinds, k)
			case k.Earliest.Before(out.Kinds[j].Earliest):
				out.Kinds[j].Earliest = k.Earliest
			}
		}
	}
	return out
}

// InsertResult counts a batch of facts.
type InsertResult struct {
	Inserted, Duplicates int
	// Subjects are the distinct subjects and links of the inserted facts,
	// sorted: the subjects whose open verifications should hear of them.
	Subjects []Subject
	// NotificationID is the outbox row that tells them, written with the
	// facts (0 when nothing was inserted). Whoever delivers the notice
	// deletes it; until then a deliverer retries it.
	NotificationID int64
	// Digest digests the batch's facts (nil when the store does not say):
	// what the notice's screen may know of them without a read.
	Digest *FactsDigest
}

// VerdictHead is what is known of an action's latest verdict without its
// body's findings: enough to tell whether the verdict is final for its
// contract version with every source available (the wake screen's
// precondition), read without decoding the verdict.
type VerdictHead struct {
	Version         int
	Provisional     bool
	ContractVersion int
	// Unavailable counts the verdict's unavailable sources.
	Unavailable int
}

// FactNotification is a notice of new facts still to deliver to the
// verifications watching its subjects.
type FactNotification struct {
	ID             int64
	TenantID       string
	Subjects       []Subject
	ExceptActionID string
	Attempts       int
	CreatedAt      time.Time
}

// FactPage is one pull of a connector: the facts read, the cursor to store
// after them, and whether the source has more after it. Every connector
// kind answers one.
type FactPage struct {
	Facts []Fact
	// Next is the connector's cursor after this page.
	Next string
	// More is true when the source has more after Next.
	More bool
}

// PulledPage is one page a pull read from one connector, to be stored
// with the connector's new cursor (postgres.DB.RecordPulls).
type PulledPage struct {
	ConnectorID string
	Facts       []Fact
	// Cursor is the connector's cursor after the page (FactPage.Next).
	Cursor string
}

// ActionQuery names actions of one contract the way PriorActions takes
// them: by agent and by subject when not empty, requested in [From, To]
// (a zero end is open), except ExcludeID.
type ActionQuery struct {
	Contract  string
	Agent     string
	Subject   Subject
	From, To  time.Time
	ExcludeID string
}

// PassReadRequest is what one verification pass reads about an action
// besides the action itself, all of it at once: the facts about its
// subject (FactsAbout), the actions of each query (PriorActions), the
// tenant's connected sources and the action's latest verdict.
type PassReadRequest struct {
	ActionID string
	Subject  Subject
	Actions  []ActionQuery
}

// PassRead answers a PassReadRequest: Actions[i] answers the request's
// Actions[i]; Latest is nil when the action has no verdict yet.
type PassRead struct {
	Facts     []Fact
	Actions   [][]Action
	Connected []string
	Latest    *Verdict
}
