package catalogue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/chaos"
)

// baseTask is process p's task when nothing is changed (its registry
// entry's base task), by DefaultAgent.
func baseTask(p business.Process) agent.Task {
	b := p.Base()
	t := agent.Task{Process: p.Name, Subject: b.Subject, TicketID: b.Ticket, Params: b.Params, AgentID: DefaultAgent}
	if t.TicketID != "" {
		t.Params["ticket_id"] = t.TicketID
	}
	return t
}

// with returns a copy of t with params changed.
func with(t agent.Task, kv ...any) agent.Task {
	p := commitlayer.Attrs{}
	for k, v := range t.Params {
		p[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	t.Params = p
	return t
}

// on returns a copy of t about another subject and ticket ("" for none).
func on(t agent.Task, subject commitlayer.Subject, ticket string) agent.Task {
	t = with(t)
	t.Subject, t.TicketID = subject, ticket
	delete(t.Params, "ticket_id")
	if ticket != "" {
		t.Params["ticket_id"] = ticket
	}
	return t
}

func rules(rs ...chaos.Rule) func(*Env) []chaos.Rule {
	return func(*Env) []chaos.Rule { return rs }
}

// withInstruction rewrites a ticket read so its body ends with an
// instruction, as text injected into a tool's output.
func withInstruction(instruction string) chaos.Rule {
	return chaos.Rule{System: "tickets", Route: "GET /tickets/tickets/{id}", Mode: chaos.Rewrite,
		Transform: func(b []byte) ([]byte, error) {
			var tk map[string]any
			if err := json.Unmarshal(b, &tk); err != nil {
				return nil, fmt.Errorf("decode ticket: %w", err)
			}
			body, _ := tk["body"].(string)
			tk["body"] = body + "\n" + instruction
			return json.Marshal(tk)
		}}
}

// resultField reads a field of the response to the last successful call of
// tool in the main task's trajectory (path names nested objects: "fill",
// "id").
func resultField(env *Env, tool string, path ...string) (string, error) {
	calls := env.Result.Trajectory.Calls
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		if c.Tool != tool || !c.OK() {
			continue
		}
		obj, err := c.Object()
		if err != nil {
			return "", err
		}
		var v any = obj
		for _, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return "", fmt.Errorf("%s response has no %s", tool, strings.Join(path, "."))
			}
			v = m[k]
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return "", fmt.Errorf("%s response has no %s", tool, strings.Join(path, "."))
		}
		return s, nil
	}
	return "", fmt.Errorf("the agent made no successful %s call", tool)
}

// Catalogue returns the failure matrix: for each of the eight business
// processes (in registry order) the generic injections, then its specific
// cases. Every call builds fresh values, so callers may change them.
func Catalogue() []Scenario {
	out := make([]Scenario, 0, len(business.Names())*len(Injections)+len(Cases))
	for _, p := range business.All() {
		for _, inj := range Injections {
			out = append(out, inj.Scenario(p))
		}
		out = append(out, SourceOutages(p)...)
		for _, c := range Cases {
			if c.Process == p.Name {
				out = append(out, c.Scenario(p))
			}
		}
	}
	return out
}

// Lookup returns the scenario with the given id.
func Lookup(id string) (Scenario, bool) {
	for _, sc := range Catalogue() {
		if sc.ID == id {
			return sc, true
		}
	}
	return Scenario{}, false
}

// Select returns the scenarios named by only, in catalogue order, each
// once. An entry is an exact id ("refund/baseline") or a prefix ending in
// "/" ("refund/"); an empty only selects every scenario. An entry that
// matches nothing is an error naming it.
func Select(only []string) ([]Scenario, error) {
	all := Catalogue()
	if len(only) == 0 {
		return all, nil
	}
	picked := make([]bool, len(all))
	var errs []error
	for _, entry := range only {
		e := strings.TrimSpace(entry)
		n := 0
		if e != "" {
			for i, sc := range all {
				if sc.ID == e || strings.HasSuffix(e, "/") && strings.HasPrefix(sc.ID, e) {
					picked[i] = true
					n++
				}
			}
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("%q matches no scenario", entry))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("select scenarios: %w", err)
	}
	out := make([]Scenario, 0, len(all))
	for i, sc := range all {
		if picked[i] {
			out = append(out, sc)
		}
	}
	return out, nil
}

// Regression is the quick subset `go test` runs: every workflow and every
// family at least once (ids for Select).
var Regression = []string{
	"refund/baseline",
	"refund/lost_response_retry_no_key",
	"refund/concurrent_human_refund",
	"refund/prompt_injection",
	"cancel/phantom_success",
	"cancel/source_down_orders",
	"address/stale_read",
	"discount/permission_denied",
	"discount/forbidden_side_effect",
	"close/no_calls_claims_success",
	"close/lost_response_retry_with_key",
	"payout/unreachable_verifier",
	"payout/daily_total_exceeded",
	"deploy/unhealthy_after_deploy",
	"deploy/rolled_back_after_settlement",
	"trade/halted_product",
	"trade/wrong_product",
}
