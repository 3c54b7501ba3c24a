package mcpgw

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// record records the actions a bound call makes and returns the text the
// agent is told (a FAIL verdict with -wait), if any.
func (g *Gateway) record(ctx context.Context, name string, req *mcp.CallToolRequest, reqID string, rawArgs json.RawMessage,
	res *mcp.CallToolResult, requestedAt time.Time, b *contracts.Bindings) []mcp.Content {
	args, err := decodeObject(rawArgs)
	if err != nil {
		g.log.WarnContext(ctx, "mcp gateway: bound call not recorded: arguments are not a JSON object", "tool", name)
		return nil
	}
	result, text := resultValue(res)
	matches, err := b.Match(name, args, result)
	if err != nil {
		g.log.WarnContext(ctx, "mcp gateway: binding could not be evaluated", "tool", name, "error", err)
	}
	if len(matches) == 0 {
		return nil
	}
	session := g.sessionID(req.Session)
	if reqID == "" { // no id reached the handler: this call alone
		var r [12]byte
		_, _ = rand.Read(r[:])
		reqID = "unknown-" + hex.EncodeToString(r[:])
	}
	claim := commitlayer.Claim{Status: commitlayer.ClaimSuccess, Message: commitlayer.Clip(text, maxClaimMessage)}
	if res.IsError {
		claim.Status = commitlayer.ClaimFailure
	}
	trace, _ := json.Marshal([]map[string]string{{"source": "mcp", "session": session, "request_id": reqID, "tool": name}})
	agent := g.agentName(req.Session)
	budget := g.cfg.RecordTimeout
	if g.cfg.Wait {
		budget = g.cfg.WaitTimeout + g.cfg.RecordTimeout
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	var notes []mcp.Content
	g.began.Remove(session) // the next call begins the next action's work
	for _, m := range matches {
		fp := m.Fingerprint()
		key := idempotencyKey(session, reqID, m.Contract.ID(), m.Binding)
		if prev, ok := g.seen.Peek(key); ok && prev.fingerprint != fp {
			// MCP forbids reusing an id in a session; an agent that does
			// makes another call, not a retry: its own action.
			g.log.WarnContext(ctx, "mcp gateway: JSON-RPC id reused in the session for another call; recorded as an action of its own",
				"tool", name, "request_id", reqID)
			key = idempotencyKey(session, reqID+"#"+fp[:16], m.Contract.ID(), m.Binding)
		}
		key = g.retryKey(session, agent, m, key, res.IsError)
		a := commitlayer.Action{Contract: m.Contract.ID(), Agent: agent, Subject: m.Subject, Params: m.Params,
			RequestedAt: requestedAt, Claim: claim, Trace: trace}
		if prev, ok, _ := g.seen.PeekOrAdd(key, seenAction{action: a, fingerprint: fp}); ok {
			a = prev.action
		}
		acc, err := g.cfg.Recorder.Record(rctx, a, key, g.cfg.Wait, g.cfg.WaitTimeout)
		if err != nil {
			why := "CommitLayer did not answer"
			if permanent(err) {
				why = "CommitLayer refused to record it"
				g.log.ErrorContext(ctx, "mcp gateway: action not recorded: CommitLayer refused it", "tool", name,
					"contract", a.Contract, "subject", string(a.Subject), "idempotency_key", key, "error", err)
			} else {
				g.log.WarnContext(ctx, "mcp gateway: record action; posting it again in the background", "tool", name,
					"contract", a.Contract, "subject", string(a.Subject), "idempotency_key", key, "error", err)
				g.owe(a, key, err)
			}
			if g.cfg.Wait {
				notes = append(notes, &mcp.TextContent{Text: fmt.Sprintf("CommitLayer: this call (%s on %s) could not be "+
					"verified yet: %s. The result above is the upstream's, unverified.", a.Contract, a.Subject, why)})
			}
			continue
		}
		attrs := []any{"tool", name, "contract", a.Contract, "subject", string(a.Subject), "action", acc.ID,
			"agent", agent, "replayed", acc.Replayed}
		if acc.Verdict != nil {
			attrs = append(attrs, "verdict", string(acc.Verdict.Status))
		}
		g.log.InfoContext(ctx, "mcp gateway: action recorded", attrs...)
		if acc.Verdict != nil && acc.Verdict.Status == commitlayer.StatusFail {
			notes = append(notes, &mcp.TextContent{Text: failNote(acc.ID, a, *acc.Verdict)})
		}
	}
	return notes
}

// idempotencyKey is the action's key: the session, the JSON-RPC id, the
// contract and the binding (hashed when longer than the API takes).
func idempotencyKey(session, reqID, contract string, binding int) string {
	k := fmt.Sprintf("mcp/%s/%s/%s/%d", session, reqID, contract, binding)
	if len(k) <= maxKeyLen && !strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "mcp/" + hex.EncodeToString(sum[:])
}

// failNote tells the agent its call did not verify.
func failNote(actionID string, a commitlayer.Action, v commitlayer.Verdict) string {
	var b strings.Builder
	stage := "final"
	if v.Provisional {
		stage = "provisional"
	}
	fmt.Fprintf(&b, "CommitLayer: this call did NOT verify against the systems of record (verdict FAIL, %s). "+
		"Action %s (%s on %s).", stage, actionID, a.Contract, a.Subject)
	for _, f := range v.Findings {
		fmt.Fprintf(&b, "\n- %s %s: %s", f.Code, f.Check, f.Message)
		if f.Hint != "" {
			fmt.Fprintf(&b, " (hint: %s", f.Hint)
			if say := hintWords[f.Hint]; say != "" {
				fmt.Fprintf(&b, ": %s", say)
			}
			b.WriteString(")")
		}
	}
	b.WriteString("\nDo not report this step as done until the systems of record show it.")
	return b.String()
}

// hintWords say what each remedy asks of an agent.
var hintWords = map[commitlayer.Remedy]string{
	commitlayer.RemedyHumanReview: "a person should look before anything else happens",
	commitlayer.RemedyCompensate:  "an effect happened that must be undone or made good",
	commitlayer.RemedyRetryRead:   "the systems may not have reported yet; the verdict can change",
}

// resultValue is a call's result as bindings read it (structuredContent
// when it is an object; else the text content when it is a JSON object;
// else {"text": …}), and its text.
func resultValue(res *mcp.CallToolResult) (map[string]any, string) {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	text := strings.Join(texts, "\n")
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			if m, err := decodeObject(raw); err == nil && m != nil {
				return m, text
			}
		}
	}
	if m, err := decodeObject(json.RawMessage(text)); err == nil && m != nil {
		return m, text
	}
	if text == "" {
		return map[string]any{}, text
	}
	return map[string]any{"text": text}, text
}

// decodeObject decodes a JSON object with exact integers; empty is an
// empty object, anything but an object an error.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return map[string]any{}, nil
	}
	var a commitlayer.Attrs
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	if a == nil {
		return nil, errors.New("not an object")
	}
	return a, nil
}
