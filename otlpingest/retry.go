package otlpingest

import (
	"encoding/json"
	"time"

	"github.com/commitlayer/commitlayer"
)

// RetryChains joins an agent's retries to the action of the call they
// retry, within one request: an execute_tool span that repeats, in the
// same trace and for the same agent, the action (contract, subject,
// params) of an earlier span whose call failed records as that span's
// action (its key, hash and body: the API answers it again and records
// nothing new). The action's effect window then holds every attempt, so
// a timed-out refund retried without an idempotency key shows as the
// duplicate it is. A call that did not fail ends the chain. Spans are
// joined in the order given (ToolCalls' order; Join them by start time).
// Retries exported in another request than the call they retry are
// actions of their own.
type RetryChains map[string]Recording

// Join returns the recording rec of call c stands for.
func (rc RetryChains) Join(c ToolCall, rec Recording) Recording {
	params, _ := json.Marshal(rec.Action.Params) // attrs are JSON values; sorted keys
	chain := c.TraceID + "\x00" + rec.Action.Agent + "\x00" + rec.Action.Contract + "\x00" + string(rec.Action.Subject) + "\x00" + string(params)
	if first, ok := rc[chain]; ok {
		rec = first
	}
	if c.Claim.Status == commitlayer.ClaimFailure {
		rc[chain] = rec
	} else {
		delete(rc, chain)
	}
	return rec
}

// WorkStarts gives the actions of one request their requested_at as the
// gateway does: when the agent began the work that led to the call, the
// start of the trace's first execute_tool span (bound or not) since its
// last one that recorded an action. The reads and writes on the way to the
// bound call (a note added before the ticket is closed) fall in the
// action's window. Feed it the calls in start order.
type WorkStarts map[string]time.Time

// Began notes call c and returns when the work of an action it records
// began.
func (w WorkStarts) Began(c ToolCall) time.Time {
	t, ok := w[c.TraceID]
	if !ok {
		t = c.Start
		w[c.TraceID] = t
	}
	return t
}

// Recorded says c recorded an action: the next call begins the next
// action's work.
func (w WorkStarts) Recorded(c ToolCall) { delete(w, c.TraceID) }
