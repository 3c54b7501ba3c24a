package service

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// ToolCall is one call of a tool as an entry point saw it: the MCP gateway
// (a tools/call) or OTLP ingest (a tool-execution span).
type ToolCall struct {
	Source string // "mcp", "otlp": the first segment of its keys
	// Scope is where an agent's retry chain lives (the MCP session, the
	// OTLP trace id); CallID is the call's own id there (the JSON-RPC id,
	// the span id).
	Scope, CallID string
	// Name names the call in messages ("span 00f0…"; default "call " and
	// its id).
	Name string
	Tool string
	// Args and Result are the call's arguments and result as bindings read
	// them (Result {"text": …} when it is not an object); Args nil when the
	// call carried none.
	Args, Result map[string]any
	// NoArgs says why a call may carry no arguments, for the message of a
	// binding that needs them (default "it carried no arguments").
	NoArgs  string
	Failed  bool   // the call answered an error: claim failure
	Message string // the claim's message
	Agent   string
	Start   time.Time
	// Trace is the call's entry in the action's trace (where it was seen);
	// the recorder adds its claim.
	Trace map[string]string
}

// Recording is one action a bound call records.
type Recording struct {
	// Action is the chain's action as this attempt sees it; its id is
	// derived from ChainKey.
	Action commitlayer.Action
	// ChainKey is the Idempotency-Key of the chain's action (its first
	// attempt's key); Hash the request hash recording it in process.
	ChainKey string
	Hash     []byte
	// Key is this attempt's own key; Entry its trace entry.
	Key   string
	Entry json.RawMessage
	// Retry says the call is a later attempt of an existing chain, recorded
	// with Actions.RecordAttempt under Key.
	Retry bool
}

// Bounds of what a ToolCalls keeps, and of what one call records.
const (
	DefaultToolCallEntries = 16384
	DefaultToolCallBytes   = 8 << 20
	maxClaimMessage        = 2048
	maxKeyLen              = 255
	maxTraceValue          = 256
)

// ToolCalls turns tool calls into the actions they record, for the MCP
// gateway and OTLP ingest alike: the binding match, the retry chain, when
// the work began and the idempotency keys. It does no I/O and is safe for
// concurrent use; what it keeps is bounded in entries and bytes (LRU), and
// holds only keys, hashes and times.
//
// Work began: an action's requested_at is the start of the scope's first
// call (bound or not) since its last one that recorded an action, so the
// reads and writes on the way to the bound call fall in the action's window.
//
// Retry chain: a call that repeats, in the same scope and for the same
// agent, the match (contract, binding, subject, params) of a call that
// failed is a retry attempt of that call's action, whose effect window
// then holds every attempt: a timed-out refund retried without an
// idempotency key shows as the duplicate it is. A call that did not fail
// ends the chain. A call id seen before with the same match is the same
// call again; an id reused for another match is another call.
type ToolCalls struct {
	mu     sync.Mutex
	bytes  int
	limit  int
	began  *lru.Cache[string, time.Time]
	chains *lru.Cache[string, chain]
	calls  *lru.Cache[string, seenCall]
}

type chain struct {
	key string
	at  time.Time
}

type seenCall struct {
	fp string // the match's fingerprint, 16 hex digits
	chain
}

// NewToolCalls returns a recorder keeping at most entries entries and
// bytes bytes (defaults when <= 0).
func NewToolCalls(entries, bytes int) *ToolCalls {
	if entries <= 0 {
		entries = DefaultToolCallEntries
	}
	if bytes <= 0 {
		bytes = DefaultToolCallBytes
	}
	r := &ToolCalls{limit: bytes}
	r.began, _ = lru.NewWithEvict(entries, func(k string, _ time.Time) { r.bytes -= len(k) + 24 })
	r.chains, _ = lru.NewWithEvict(entries, func(k string, v chain) { r.bytes -= len(k) + len(v.key) + 24 })
	r.calls, _ = lru.NewWithEvict(entries, func(k string, v seenCall) { r.bytes -= len(k) + len(v.key) + 40 })
	return r
}

// Bytes is what the recorder keeps, in bytes (keys, hashes and times).
func (r *ToolCalls) Bytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// Record notes call c and returns the recordings it makes under b: none
// when no contract binds its tool (bound false). An error names each
// binding or check that failed; the other matches are still returned.
func (r *ToolCalls) Record(c ToolCall, b *contracts.Bindings) (recs []Recording, bound bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	scope := hashed(c.Source, c.Scope)
	if t, ok := r.began.Peek(scope); c.Start.Unix() > 0 && (!ok || c.Start.Before(t)) {
		add(r, r.began, scope, c.Start, len(scope)+24)
	}
	if !b.Bound(c.Tool) {
		return nil, false, nil
	}
	tool, name := commitlayer.Clip(c.Tool, 64), c.Name
	if name == "" {
		name = "call " + commitlayer.Clip(c.CallID, 64)
	}
	switch {
	case c.Scope == "" || c.CallID == "":
		return nil, true, fmt.Errorf("%s of tool %s: no scope or call id", name, tool)
	case c.Start.Unix() <= 0:
		return nil, true, fmt.Errorf("%s of tool %s: no start time", name, tool)
	case c.Agent == "":
		return nil, true, fmt.Errorf("%s of tool %s: no agent", name, tool)
	}
	matches, err := b.Match(c.Tool, c.Args, c.Result)
	switch {
	case err != nil && c.Args == nil:
		err = fmt.Errorf("%s of tool %s: %w (%s)", name, tool, err, cmp.Or(c.NoArgs, "it carried no arguments"))
	case err != nil:
		err = fmt.Errorf("%s of tool %s: %w", name, tool, err)
	}
	claim := commitlayer.Claim{Status: commitlayer.ClaimSuccess, Message: commitlayer.Clip(c.Message, maxClaimMessage)}
	if c.Failed {
		claim.Status = commitlayer.ClaimFailure
	}
	entry := map[string]string{"claim": claim.Status}
	for k, v := range c.Trace {
		entry[k] = commitlayer.Clip(v, maxTraceValue)
	}
	rawEntry, _ := json.Marshal(entry) // strings only: cannot fail
	began, _ := r.began.Peek(scope)
	for _, m := range matches {
		rec := r.recording(c, m, began)
		rec.Action.Claim, rec.Entry = claim, rawEntry
		rec.Action.Trace = append(append(json.RawMessage("["), rawEntry...), ']')
		if cerr := CheckAction(rec.Action, time.Time{}); cerr != nil {
			err = errors.Join(err, fmt.Errorf("%s, contract %s: %w", name, m.Contract.ID(), cerr))
			continue
		}
		recs = append(recs, rec)
	}
	if len(recs) > 0 {
		r.began.Remove(scope) // the next call begins the next action's work
	}
	return recs, true, err
}

// recording places one match in its chain and returns its recording
// (claim and trace left to the caller).
func (r *ToolCalls) recording(c ToolCall, m contracts.Match, began time.Time) Recording {
	fp := m.Fingerprint()
	own := toolCallKey(c.Source, c.Scope, c.CallID, m.Contract.ID(), m.Binding)
	seen, again := r.calls.Get(own)
	if again && seen.fp != fp[:16] {
		// MCP forbids reusing an id in a session; an agent that does makes
		// another call, not a retry: an action of its own.
		own = toolCallKey(c.Source, c.Scope, c.CallID+"#"+fp[:16], m.Contract.ID(), m.Binding)
		seen, again = r.calls.Get(own)
	}
	chainID := hashed(c.Source, c.Scope, c.Agent, fp)
	rec := Recording{Key: own}
	ch := chain{key: own, at: began}
	if again {
		// The same call again: an attempt of its chain, keyed by what it
		// answered this time (the same answer again records nothing new).
		ch, rec.Retry = seen.chain, true
		sum := sha256.Sum256(fmt.Appendf(nil, "%t\x00%s", c.Failed, c.Message))
		rec.Key = clampKey(c.Source, own+"/again/"+hex.EncodeToString(sum[:6]))
	} else if open, ok := r.chains.Get(chainID); ok {
		ch, rec.Retry = open, true
	}
	if c.Failed {
		add(r, r.chains, chainID, ch, len(chainID)+len(ch.key)+24)
	} else {
		r.chains.Remove(chainID)
	}
	if !again {
		add(r, r.calls, own, seenCall{fp: fp[:16], chain: ch}, len(own)+len(ch.key)+40)
	}
	rec.ChainKey = ch.key
	sum := sha256.Sum256([]byte(ch.key))
	rec.Hash = sum[:]
	rec.Action = commitlayer.Action{ID: ActionIDOf(ch.key), Contract: m.Contract.ID(), Agent: c.Agent,
		Subject: m.Subject, Params: m.Params, RequestedAt: ch.at}
	return rec
}

// add adds k to c, then drops the least recently used entries of all
// three caches while the recorder keeps more than its bytes.
func add[V any](r *ToolCalls, c *lru.Cache[string, V], k string, v V, size int) {
	if c.Contains(k) {
		c.Remove(k)
	}
	c.Add(k, v)
	r.bytes += size
	for r.bytes > r.limit {
		switch {
		case r.calls.Len() > 0:
			r.calls.RemoveOldest()
		case r.chains.Len() > 0:
			r.chains.RemoveOldest()
		case r.began.Len() > 0:
			r.began.RemoveOldest()
		default:
			return
		}
	}
}

// ActionIDOf is the id of the action a chain records under key: derived
// from it, so an attempt can name its action before the action's answer is
// known.
func ActionIDOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "act_" + idEncoding.EncodeToString(sum[:10])
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// toolCallKey is a call's key: source, scope, call id, contract and
// binding.
func toolCallKey(source, scope, callID, contract string, binding int) string {
	return clampKey(source, fmt.Sprintf("%s/%s/%s/%s/%d", source, scope, callID, contract, binding))
}

// clampKey hashes a key longer than the API takes or holding control
// characters.
func clampKey(source, k string) string {
	if len(k) <= maxKeyLen && !strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return source + "/" + hex.EncodeToString(sum[:])
}

// hashed is a fixed-size map key for parts.
func hashed(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return string(h.Sum(nil))
}
