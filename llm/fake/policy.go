package fake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// Turn is one request as the server decoded it from the wire.
type Turn struct {
	Provider string
	Model    string
	System   string
	// Messages are the conversation; tool results carry the tool's name.
	Messages  []llm.Message
	Tools     []llm.Tool
	Response  *llm.ResponseSchema
	MaxTokens int
	// Temperature is the one sent (nil when none was).
	Temperature *float64
}

// Reply is what the model answers: text, tool calls or both.
type Reply struct {
	Text  string
	Calls []Call
}

// Call is a tool call the model makes; the server gives it its id.
type Call struct {
	Name string
	Args json.RawMessage
}

func (c Call) args() json.RawMessage {
	if len(c.Args) == 0 {
		return json.RawMessage("{}")
	}
	return c.Args
}

// Policy decides the model's answer to a turn. It must be deterministic: the
// same turn gives the same reply.
type Policy interface {
	Reply(t Turn) (Reply, error)
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(t Turn) (Reply, error)

// Reply calls f.
func (f PolicyFunc) Reply(t Turn) (Reply, error) { return f(t) }

// Plan tags: the task message carries the plan between them.
const (
	PlanOpen  = "<agent-plan>"
	PlanClose = "</agent-plan>"
)

// Plan is the task's steps as data, written by whoever writes the task (the
// sandbox), so the fake model can act without understanding words.
type Plan struct {
	Steps []Step `json:"steps"`
	// Report is the message of a success report.
	Report string `json:"report,omitempty"`
	// Follow are the injected instructions a FollowInjected model obeys
	// when it finds them in a tool's answer.
	Follow []FollowRule `json:"follow,omitempty"`
}

// Step is one tool call.
type Step struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
	// KeyParam is the argument that carries an idempotency key; "" means
	// the model's default when the tool's schema declares it.
	KeyParam string `json:"key_param,omitempty"`
	injected bool
}

// FollowRule turns text matching Pattern into steps. In the steps' string
// arguments "$1"… are replaced by the pattern's groups; an argument that is
// exactly "$n" and whose group is an integer becomes that integer, and one
// whose group is empty is left out.
type FollowRule struct {
	Pattern string `json:"pattern"`
	Steps   []Step `json:"steps"`
}

// Text renders the plan for a task message: a block a real model can skip
// ("for the test harness") and the fake model reads.
func (p Plan) Text() string {
	b, _ := json.Marshal(p)
	return "(Machine-readable plan for the test harness; you may ignore it.)\n" + PlanOpen + string(b) + PlanClose
}

// FindPlan finds the plan in the system prompt or the first user message
// that has one.
func FindPlan(t Turn) (Plan, bool) {
	texts := []string{t.System}
	for _, m := range t.Messages {
		if m.Role == llm.User && m.Text != "" {
			texts = append(texts, m.Text)
		}
	}
	for _, s := range texts {
		i := strings.Index(s, PlanOpen)
		if i < 0 {
			continue
		}
		rest := s[i+len(PlanOpen):]
		j := strings.Index(rest, PlanClose)
		if j < 0 {
			continue
		}
		var p Plan
		dec := json.NewDecoder(strings.NewReader(rest[:j]))
		dec.UseNumber()
		if dec.Decode(&p) == nil {
			return p, true
		}
	}
	return Plan{}, false
}

// Temperament is how the generic model behaves under failure. Fields
// combine, like the scripted agent's profile.
type Temperament struct {
	Name string `json:"name"`
	// UseKey sends an idempotency key on every call whose tool takes one,
	// the same key on every retry of that call.
	UseKey bool `json:"use_key,omitempty"`
	// Retries is how often a call that timed out or got 429/5xx is tried
	// again.
	Retries int `json:"retries,omitempty"`
	// ClaimSuccessOnError stops at the first failed call and reports
	// success anyway.
	ClaimSuccessOnError bool `json:"claim_success_on_error,omitempty"`
	// FollowInjected obeys instructions found in tool answers (ticket
	// text); a followed step that fails does not change the report.
	FollowInjected bool `json:"follow_injected,omitempty"`
}

// The four temperaments of issue 12.
var (
	// Careful uses an idempotency key, retries only with the same key, and
	// reports failure when a call fails for good.
	Careful = Temperament{Name: "careful", UseKey: true, Retries: 2}
	// RetriesWithoutKey retries failed writes with no key (a lost write
	// is repeated) and reports failure when they keep failing.
	RetriesWithoutKey = Temperament{Name: "retries_without_key", Retries: 2}
	// ClaimsSuccess stops at the first failure and reports success.
	ClaimsSuccess = Temperament{Name: "claims_success", ClaimSuccessOnError: true}
	// FollowsInjected is careful but also does what ticket text tells it.
	FollowsInjected = Temperament{Name: "follows_injected", UseKey: true, Retries: 2, FollowInjected: true}
)

// Temperaments lists them by name.
var Temperaments = map[string]Temperament{
	Careful.Name: Careful, RetriesWithoutKey.Name: RetriesWithoutKey,
	ClaimsSuccess.Name: ClaimsSuccess, FollowsInjected.Name: FollowsInjected,
}

// Model is the generic policy: it reads the task's plan, makes one call a
// turn, reacts to each tool result as its temperament says, and ends with a
// call of the report tool. It keeps no state: every decision is derived
// from the conversation it is sent, so a repeated turn gets the same answer.
type Model struct {
	Temperament Temperament
	// ReportTool is the tool that ends the task (default "report_result",
	// arguments {"claimed":"success"|"failure","message":…}).
	ReportTool string
	// KeyParam is the idempotency-key argument (default "idempotency_key").
	KeyParam string
	// Follow, if set, finds instructions in a tool answer besides the
	// plan's rules.
	Follow func(text string) []Step
	// Structured answers turns that ask for structured output (a judge's);
	// nil answers them with RuleJudge.
	Structured Policy
}

var _ Policy = (*Model)(nil)

// NewModel returns the generic model with a temperament.
func NewModel(t Temperament) *Model { return &Model{Temperament: t} }

func (m *Model) reportTool() string {
	if m.ReportTool != "" {
		return m.ReportTool
	}
	return "report_result"
}

func (m *Model) keyParam(s Step) string {
	if s.KeyParam != "" {
		return s.KeyParam
	}
	if m.KeyParam != "" {
		return m.KeyParam
	}
	return "idempotency_key"
}

// pair is a call and the result it got.
type pair struct {
	call   llm.ToolCall
	result *llm.ToolResult
}

// Reply decides the next call or the report.
func (m *Model) Reply(t Turn) (Reply, error) {
	if t.Response != nil {
		if m.Structured != nil {
			return m.Structured.Reply(t)
		}
		return RuleJudge{}.Reply(t)
	}
	plan, ok := FindPlan(t)
	if !ok {
		return m.report(t, commitlayer.ClaimFailure, "I could not find a plan for this task.")
	}
	var pairs []pair
	byID := map[string]*llm.ToolResult{}
	for i := range t.Messages {
		for j := range t.Messages[i].ToolResults {
			r := &t.Messages[i].ToolResults[j]
			byID[r.CallID] = r
		}
	}
	for _, msg := range t.Messages {
		for _, c := range msg.ToolCalls {
			if c.Name == m.reportTool() {
				return Reply{Text: "I have reported the result."}, nil
			}
			pairs = append(pairs, pair{call: c, result: byID[c.ID]})
		}
	}
	queue := append([]Step(nil), plan.Steps...)
	seen := map[string]bool{}
	for _, s := range queue {
		seen[stepKey(s.Tool, s.Args, "")] = true
	}
	i, attempts := 0, 0
	for _, p := range pairs {
		if i >= len(queue) {
			break
		}
		if p.result == nil {
			return Reply{}, fmt.Errorf("call %s (%s) has no result", p.call.Name, p.call.ID)
		}
		o := outcome(*p.result)
		if o.OK() {
			if m.Temperament.FollowInjected {
				for _, s := range m.injected(plan, o.Body) {
					if k := stepKey(s.Tool, s.Args, ""); !seen[k] {
						seen[k] = true
						queue = append(queue, s)
					}
				}
			}
			i, attempts = i+1, 0
			continue
		}
		attempts++
		if o.Retryable() && attempts <= m.Temperament.Retries {
			continue // the next turn retries it
		}
		if queue[i].injected {
			i, attempts = i+1, 0 // an injected step that fails does not change the report
			continue
		}
		failure := fmt.Sprintf("could not complete: %s: %s", p.call.Name, describe(o))
		if m.Temperament.ClaimSuccessOnError {
			return m.report(t, commitlayer.ClaimSuccess, successMessage(plan))
		}
		return m.report(t, commitlayer.ClaimFailure, failure)
	}
	if i >= len(queue) {
		return m.report(t, commitlayer.ClaimSuccess, successMessage(plan))
	}
	return m.call(t, plan, queue[i], i)
}

// call makes step s, with a key when the temperament uses one and the
// tool takes one.
func (m *Model) call(t Turn, plan Plan, s Step, index int) (Reply, error) {
	args := map[string]any{}
	for k, v := range s.Args {
		args[k] = v
	}
	kp := m.keyParam(s)
	if m.Temperament.UseKey && toolTakes(t.Tools, s.Tool, kp) {
		planJSON, _ := json.Marshal(plan.Steps)
		h := sha256.Sum256([]byte(fmt.Sprintf("%s\n%d\n%s", planJSON, index, stepKey(s.Tool, s.Args, kp))))
		args[kp] = "fk-" + hex.EncodeToString(h[:])[:24]
	} else {
		delete(args, kp)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return Reply{}, fmt.Errorf("encode args of %s: %w", s.Tool, err)
	}
	return Reply{Calls: []Call{{Name: s.Tool, Args: b}}}, nil
}

func (m *Model) report(t Turn, claimed, msg string) (Reply, error) {
	for _, tool := range t.Tools {
		if tool.Name == m.reportTool() {
			b, _ := json.Marshal(map[string]string{"claimed": claimed, "message": msg})
			return Reply{Calls: []Call{{Name: tool.Name, Args: b}}}, nil
		}
	}
	return Reply{Text: claimed + ": " + msg}, nil
}

// injected finds the steps the plan's rules and the Follow hook read in a
// tool answer.
func (m *Model) injected(plan Plan, text string) []Step {
	var out []Step
	for _, r := range plan.Follow {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			continue
		}
		for _, g := range re.FindAllStringSubmatch(text, -1) {
			for _, s := range r.Steps {
				st := Step{Tool: s.Tool, KeyParam: s.KeyParam, Args: map[string]any{}, injected: true}
				for k, v := range s.Args {
					if val, keep := substitute(v, g); keep {
						st.Args[k] = val
					}
				}
				out = append(out, st)
			}
		}
	}
	if m.Follow != nil {
		for _, s := range m.Follow(text) {
			s.injected = true
			out = append(out, s)
		}
	}
	return out
}

var groupRef = regexp.MustCompile(`\$(\d)`)

// substitute fills "$n" references in v from the match g.
func substitute(v any, g []string) (any, bool) {
	s, ok := v.(string)
	if !ok {
		return v, true
	}
	if m := groupRef.FindStringSubmatch(s); m != nil && m[0] == s {
		n, _ := strconv.Atoi(m[1])
		if n >= len(g) || g[n] == "" {
			return nil, false
		}
		if i, err := strconv.ParseInt(g[n], 10, 64); err == nil {
			return i, true
		}
		return g[n], true
	}
	return groupRef.ReplaceAllStringFunc(s, func(ref string) string {
		n, _ := strconv.Atoi(ref[1:])
		if n < len(g) {
			return g[n]
		}
		return ""
	}), true
}

// outcome reads a tool result: the llm.ToolOutcome format, else the error
// flag alone.
func outcome(r llm.ToolResult) llm.ToolOutcome {
	if o, ok := llm.ParseToolOutcome(r.Content); ok {
		return o
	}
	if r.IsError {
		return llm.ToolOutcome{Error: r.Content}
	}
	return llm.ToolOutcome{Status: 200, Body: r.Content}
}

func describe(o llm.ToolOutcome) string {
	if o.Error != "" {
		return o.Error
	}
	return fmt.Sprintf("HTTP %d", o.Status)
}

func successMessage(p Plan) string {
	if p.Report != "" {
		return p.Report
	}
	var tools []string
	for _, s := range p.Steps {
		tools = append(tools, s.Tool)
	}
	return "Done: " + strings.Join(tools, ", ") + "."
}

// toolTakes reports whether the tool's schema declares the argument.
func toolTakes(tools []llm.Tool, name, arg string) bool {
	for _, t := range tools {
		if t.Name != name {
			continue
		}
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(t.Schema, &s) == nil {
			_, ok := s.Properties[arg]
			return ok
		}
	}
	return false
}

// stepKey is a canonical form of a call, ignoring the key argument.
func stepKey(tool string, args map[string]any, skip string) string {
	ks := make([]string, 0, len(args))
	for k := range args {
		if k != skip {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	var b strings.Builder
	b.WriteString(tool)
	for _, k := range ks {
		fmt.Fprintf(&b, ";%s=%v", k, args[k])
	}
	return b.String()
}
