package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/service"
)

// record passes a call to the recorder (service.ToolCalls) and records what
// it says: a new action, or a retry as an attempt of its chain's action. It
// returns what the agent is told: a record CommitLayer refused, or with
// Wait a FAIL verdict or a record CommitLayer has not taken yet.
func (g *Gateway) record(ctx context.Context, req *mcp.CallToolRequest, name, reqID string, rawArgs json.RawMessage,
	res toolResult, start time.Time) []string {
	b := g.currentBindings(ctx)
	session := g.sessionID(req.Session)
	call := service.ToolCall{Source: "mcp", Scope: session, CallID: reqID, Tool: name, Agent: g.agentName(req.Session), Start: start}
	if b.Bound(name) {
		args, err := decodeObject(rawArgs)
		if err != nil {
			g.log.WarnContext(ctx, "mcp gateway: bound call not recorded: arguments are not a JSON object", "tool", name)
			return nil
		}
		call.Args = args
		call.Result, call.Message = res.value()
		call.Failed = res.IsError
		if call.CallID == "" { // no id reached the handler: this call alone
			call.CallID = commitlayer.NewID("unknown-")
		}
		call.Trace = map[string]string{"source": "mcp", "session": session, "request_id": call.CallID, "tool": name}
	}
	recs, _, err := g.calls.Record(call, b)
	if err != nil {
		g.log.WarnContext(ctx, "mcp gateway: binding could not be evaluated", "tool", name, "error", err)
	}
	budget := g.cfg.RecordTimeout
	if g.cfg.Wait {
		budget += g.cfg.WaitTimeout
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	var notes []string
	for _, rec := range recs {
		a := rec.Action
		o := &owed{action: a, chainKey: rec.ChainKey, key: rec.Key, entry: rec.Entry, attempt: rec.Retry}
		acc, err := g.post(rctx, o, g.cfg.Wait)
		what := fmt.Sprintf("%s on %s", a.Contract, a.Subject)
		switch {
		case err != nil && permanent(err):
			g.log.ErrorContext(ctx, "mcp gateway: call not recorded: CommitLayer refused it", "tool", name,
				"contract", a.Contract, "subject", string(a.Subject), "idempotency_key", rec.Key, "error", err)
			notes = append(notes, fmt.Sprintf("CommitLayer refused to record this call (%s): %s. It is not verified.", what, apiMessage(err)))
		case err != nil:
			g.log.WarnContext(ctx, "mcp gateway: record; posting it again in the background", "tool", name,
				"contract", a.Contract, "subject", string(a.Subject), "idempotency_key", rec.Key, "error", err)
			g.owe(o, err)
			if g.cfg.Wait {
				notes = append(notes, fmt.Sprintf("CommitLayer: this call (%s) could not be verified yet: CommitLayer did not answer. "+
					"The result above is the upstream's, unverified.", what))
			}
		default:
			attrs := []any{"tool", name, "contract", a.Contract, "subject", string(a.Subject), "action", acc.ID,
				"agent", a.Agent, "attempt", rec.Retry, "replayed", acc.Replayed}
			if acc.Verdict != nil {
				attrs = append(attrs, "verdict", string(acc.Verdict.Status))
			}
			g.log.InfoContext(ctx, "mcp gateway: action recorded", attrs...)
			if acc.Verdict != nil && acc.Verdict.Status == commitlayer.StatusFail {
				notes = append(notes, failNote(acc.ID, a, *acc.Verdict))
			}
		}
	}
	return notes
}

// post records o: a new action under its chain's key, or an attempt of its
// chain's action once that is recorded (when the API does not know the
// action, the attempt is recorded as the action itself, claiming this
// attempt).
func (g *Gateway) post(ctx context.Context, o *owed, wait bool) (client.Accepted, error) {
	g.pendMu.Lock()
	_, waiting := g.pending[o.chainKey]
	g.pendMu.Unlock()
	if o.attempt && waiting {
		return client.Accepted{}, errors.New("its action is not recorded yet")
	}
	if o.attempt {
		acc, err := g.cfg.Recorder.RecordAttempt(ctx, o.action.ID, o.key, o.action.Claim, o.entry, wait, g.cfg.WaitTimeout)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
			return acc, err
		}
	}
	return g.cfg.Recorder.Record(ctx, o.action, o.chainKey, wait, g.cfg.WaitTimeout)
}

// apiMessage is what the API said of a record it refused.
func apiMessage(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Message != "" {
		return fmt.Sprintf("%d %s", ae.StatusCode, commitlayer.Clip(ae.Message, 300))
	}
	return commitlayer.Clip(err.Error(), 300)
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

// value is a call's result as bindings read it (structuredContent when it
// is an object; else the text content when it is a JSON object; else
// {"text": …}), and its text.
func (r toolResult) value() (map[string]any, string) {
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	text := strings.Join(texts, "\n")
	if m, err := decodeObject(r.StructuredContent); err == nil && len(r.StructuredContent) > 0 && m != nil {
		return m, text
	}
	if m, err := decodeObject(json.RawMessage(text)); err == nil && m != nil && text != "" {
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

// APIRecorder is the Recorder on CommitLayer's API through the Go client
// (contract versions compiled once, service.Contracts).
type APIRecorder struct {
	Client *client.Client

	once      sync.Once
	contracts *service.Contracts
}

var _ Recorder = (*APIRecorder)(nil)

// Bindings lists the contracts and compiles the bindings of their latest
// versions. A contract that does not compile here (a newer language on the
// server) binds nothing; the others still do.
func (r *APIRecorder) Bindings(ctx context.Context) (*contracts.Bindings, error) {
	r.once.Do(func() { r.contracts = service.NewContracts(apiContracts{r.Client}, 0) })
	list, err := r.Client.ListContracts(ctx)
	if err != nil {
		return nil, fmt.Errorf("list contracts: %w", err)
	}
	var cs []*contracts.Contract
	for _, c := range list {
		_, cc, err := r.contracts.Load(ctx, "", c.ID, c.Version)
		var stale *service.StaleContractError
		switch {
		case errors.As(err, &stale):
		case err != nil:
			return nil, fmt.Errorf("get contract %s: %w", c.ID, err)
		default:
			cs = append(cs, cc)
		}
	}
	return contracts.NewBindings(cs), nil
}

// apiContracts is the API as the contract store service.Contracts reads.
type apiContracts struct{ c *client.Client }

func (a apiContracts) GetContract(ctx context.Context, _, id string, version int) (commitlayer.ContractRecord, error) {
	c, err := a.c.GetContract(ctx, id, version)
	if err != nil {
		return commitlayer.ContractRecord{}, err
	}
	return commitlayer.ContractRecord{ID: c.ID, Version: c.Version, Source: []byte(c.Source)}, nil
}

// Record posts the action with the key, waiting for the provisional
// verdict when asked.
func (r *APIRecorder) Record(ctx context.Context, a commitlayer.Action, key string, wait bool, waitTimeout time.Duration) (client.Accepted, error) {
	return r.Client.RecordAction(ctx, a, recordOptions(key, wait, waitTimeout))
}

// RecordAttempt posts a retry as an attempt of its action.
func (r *APIRecorder) RecordAttempt(ctx context.Context, actionID, key string, claim commitlayer.Claim, entry json.RawMessage,
	wait bool, waitTimeout time.Duration) (client.Accepted, error) {
	return r.Client.RecordAttempt(ctx, actionID, key, claim, entry, recordOptions(key, wait, waitTimeout))
}

func recordOptions(key string, wait bool, waitTimeout time.Duration) client.RecordOptions {
	opts := client.RecordOptions{IdempotencyKey: key}
	if wait {
		opts.Wait, opts.WaitTimeout = client.Provisional, waitTimeout
	}
	return opts
}
