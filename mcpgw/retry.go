package mcpgw

import (
	"time"

	"github.com/commitlayer/commitlayer/contracts"
)

// workBegan is the requested_at of an action a call of session at now
// records: when the agent began the work that leads to it, the time of
// the session's first call since its last recorded one. The reads and
// writes an agent makes on the way to its bound call (the ticket it reads,
// the note it adds before it closes the ticket) fall in the action's
// window, as they do when the agent records the action itself at the
// start of its task; a call that records nothing keeps the time.
func (g *Gateway) workBegan(session string, now time.Time) time.Time {
	if t, ok, _ := g.began.PeekOrAdd(session, now); ok {
		return t
	}
	return now
}

// retryKey is the idempotency key a bound call records under. A call that
// repeats, in the same session and for the same agent, the match
// (contract, binding, subject, params) of a call answered with an error
// retries that call's action: it records under that call's key, so the
// API answers the first action again and nothing new is recorded. The
// action's effect window then holds every attempt, and an agent that
// retried a timed-out refund without an idempotency key shows as the
// duplicate it is, where an action per attempt would cut the window at
// each retry and see one refund in each. A call answered without an error
// ends the chain: the next call of the same match is a new action.
func (g *Gateway) retryKey(session, agent string, m contracts.Match, key string, isError bool) string {
	chain := session + "\x00" + agent + "\x00" + m.Fingerprint()
	if first, ok := g.retries.Get(chain); ok {
		key = first
	}
	if isError {
		g.retries.Add(chain, key)
	} else {
		g.retries.Remove(chain)
	}
	return key
}
