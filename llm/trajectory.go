package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Trajectory is what an agent did, as a trace-based evaluator sees it: the
// task, every model turn, every tool call attempt with its arguments and
// answer, and the agent's report. It is the one trajectory type: the
// sandbox's scripted agent, its model-driven agent and its replays record
// this, and the judges read it (a scripted one has no turns).
type Trajectory struct {
	Instruction string    `json:"instruction"`
	Calls       []Attempt `json:"calls"`
	Report      Report    `json:"report"`
	// Turns are the model turns (none for a scripted agent).
	Turns    []Turn `json:"turns,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Usage    Usage  `json:"usage,omitzero"`
	// Error is why a model-driven agent stopped without a report (a
	// malformed answer, a refused request, the turn limit).
	Error string `json:"error,omitempty"`
}

// Attempt is one HTTP attempt of a tool call.
type Attempt struct {
	Tool           string         `json:"tool"`
	Args           map[string]any `json:"args"`
	Attempt        int            `json:"attempt"` // 1 for the first try of these arguments
	Method         string         `json:"method,omitempty"`
	Path           string         `json:"path,omitempty"`
	Body           string         `json:"body,omitempty"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
	Status         int            `json:"status,omitempty"` // 0 when no answer came back
	Response       string         `json:"response,omitempty"`
	Error          string         `json:"error,omitempty"`
	// CallID ties the attempt to the model's tool call ("" for a scripted
	// agent).
	CallID string `json:"call_id,omitempty"`
}

// OK reports whether the attempt got a 2xx answer.
func (a Attempt) OK() bool { return a.Status >= 200 && a.Status < 300 && a.Error == "" }

// Failure names what went wrong, for reasons and reports.
func (a Attempt) Failure() string {
	if a.Error != "" {
		return fmt.Sprintf("%s: %s", a.Tool, a.Error)
	}
	return fmt.Sprintf("%s: HTTP %d", a.Tool, a.Status)
}

// Object decodes the attempt's answer as a JSON object (numbers exact,
// json.Number); an answer that is not one is an error, never a panic.
func (a Attempt) Object() (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(a.Response))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("%s: response is not a JSON object", a.Tool)
	}
	return m, nil
}

// Outcome is the attempt as the model is shown it.
func (a Attempt) Outcome() ToolOutcome {
	return ToolOutcome{Status: a.Status, Body: a.Response, Error: a.Error}
}

// Report is the agent's final report; its JSON is commitlayer.Claim's.
type Report struct {
	Status  string `json:"status"` // commitlayer.ClaimSuccess or commitlayer.ClaimFailure
	Message string `json:"message,omitempty"`
}

// Turn is one model turn: what was added to the conversation since the
// previous turn (the whole request is the prefix of turns before it) and
// what came back.
type Turn struct {
	Index     int       `json:"index"`
	Sent      []Message `json:"sent"`
	MaxTokens int       `json:"max_tokens"`
	Response  Response  `json:"response"`
	Error     string    `json:"error,omitempty"`
}

// ToolOutcome is a tool call's answer as the model sees it in a tool
// result: the HTTP status and body, or the error when none came back.
// Tool results that use this format can be read by llm/fake's policy.
type ToolOutcome struct {
	Status int    `json:"status,omitempty"`
	Body   string `json:"-"`
	Error  string `json:"error,omitempty"`
}

type outcomeWire struct {
	Status int             `json:"status,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// OK reports a 2xx answer.
func (o ToolOutcome) OK() bool { return o.Status >= 200 && o.Status < 300 && o.Error == "" }

// Retryable reports whether trying again could help: no answer, 429, 5xx.
func (o ToolOutcome) Retryable() bool {
	return !o.OK() && (o.Status == 0 || o.Status == 429 || o.Status >= 500)
}

// Content encodes the outcome for a tool result: {"status":503,"body":…}
// with a JSON body kept as JSON, or {"error":"timeout: …"}.
func (o ToolOutcome) Content() string {
	w := outcomeWire{Status: o.Status, Error: o.Error}
	if b := strings.TrimSpace(o.Body); b != "" {
		if json.Valid([]byte(b)) {
			var buf bytes.Buffer
			if json.Compact(&buf, []byte(b)) == nil {
				w.Body = buf.Bytes()
			}
		}
		if w.Body == nil {
			w.Body, _ = json.Marshal(b)
		}
	}
	out, _ := json.Marshal(w)
	return string(out)
}

// Result is the tool result for call.
func (o ToolOutcome) Result(call ToolCall) ToolResult {
	return ToolResult{CallID: call.ID, Name: call.Name, Content: o.Content(), IsError: !o.OK()}
}

// ParseToolOutcome reads a tool result's content written by Content.
func ParseToolOutcome(content string) (ToolOutcome, bool) {
	var w outcomeWire
	if err := json.Unmarshal([]byte(content), &w); err != nil || (w.Status == 0 && w.Error == "") {
		return ToolOutcome{}, false
	}
	o := ToolOutcome{Status: w.Status, Error: w.Error}
	if len(w.Body) > 0 {
		var s string
		if json.Unmarshal(w.Body, &s) == nil {
			o.Body = s
		} else {
			o.Body = string(w.Body)
		}
	}
	return o, true
}
