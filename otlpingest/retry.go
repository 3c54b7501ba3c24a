package otlpingest

import (
	"encoding/json"

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
