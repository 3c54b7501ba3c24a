// Package loop is the model-driven agent's conversation as plain data, for
// a Temporal workflow to keep in its state: Request builds the next turn,
// Step reads the model's answer (the tool calls to run next, or the final
// report), Results adds what the tool calls came back with. Nothing here
// does I/O, reads a clock or iterates a map for a decision, so a workflow
// may call it directly; the turn itself (llm.Provider.Complete) and each
// tool call are activities.
//
//	c, _ := loop.New(cfg, taskText)
//	for {
//		req, err := c.Request()           // KindLimit error: max turns reached
//		resp := <activity: provider.Complete(req)>
//		step, err := c.Step(resp)         // KindMalformed error: record an agent error
//		for _, call := range step.Calls {
//			attempt := <activity: run call through the chaos>
//			c.Record(call, attempt)           // the last one becomes the next user message
//		}
//		if c.Done { break }               // the agent reported (step.Report)
//	}
//	tr := c.Trajectory
//
// The agent must end with the report tool (report_result, arguments
// {"claimed":"success"|"failure","message":…}).
package loop

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// ReportTool is the tool that ends the task.
const ReportTool = "report_result"

// ReportSchema is its arguments.
var ReportSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"claimed":{"type":"string","enum":["success","failure"],"description":"success if the task is done, failure if not"},` +
	`"message":{"type":"string","description":"what you did, or what went wrong"}},` +
	`"required":["claimed","message"],"additionalProperties":false}`)

// Report is the tool definition offered to the model.
var Report = llm.Tool{Name: ReportTool, Schema: ReportSchema,
	Description: "Report the outcome of the task when you are done (or cannot go on). Call it exactly once, last."}

// Config bounds and shapes a conversation.
type Config struct {
	// Provider names the provider in the trajectory and in errors.
	Provider string     `json:"provider,omitempty"`
	System   string     `json:"system"`
	Tools    []llm.Tool `json:"tools"`
	// MaxTurns bounds the model turns (default 20).
	MaxTurns int `json:"max_turns"`
	// MaxTokens bounds each turn's output (default 1024).
	MaxTokens int `json:"max_tokens"`
	// Nudges is how often a turn that ends without any tool call is
	// answered with a reminder to report (default 1) before it is an error.
	Nudges int `json:"nudges"`
	// CallsBesideReport runs the calls a model sends in the same message
	// as its report (a last write and report_result as parallel tool_use
	// blocks) before the report is taken. Off, they are dropped, as
	// conversations recorded before it did (a workflow sets it behind a
	// version).
	CallsBesideReport bool `json:"calls_beside_report,omitempty"`
}

// Conversation is the agent's state between turns. It encodes to JSON.
type Conversation struct {
	Config     Config         `json:"config"`
	Messages   []llm.Message  `json:"messages"`
	Usage      llm.Usage      `json:"usage"`
	Turns      int            `json:"turns"`
	Nudged     int            `json:"nudged"`
	Trajectory llm.Trajectory `json:"trajectory"`
	// Pending are the calls Step returned whose results are not in yet.
	Pending []llm.ToolCall `json:"pending,omitempty"`
	// Results collects the results of Pending as Record adds them.
	Results []llm.ToolResult `json:"results,omitempty"`
	// Done is set once the agent has reported.
	Done bool `json:"done"`
	// Reported is the report of a message whose other calls are still
	// pending (CallsBesideReport); it is taken once they are recorded.
	Reported *llm.Report `json:"reported,omitempty"`
	// sent marks how many messages earlier turns already sent.
	Sent int `json:"sent"`
}

// New starts a conversation on a task given in words.
func New(cfg Config, task string) (*Conversation, error) {
	if task == "" {
		return nil, fmt.Errorf("new conversation: the task is empty")
	}
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = 20
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 1024
	}
	if cfg.Nudges < 0 {
		cfg.Nudges = 0
	} else if cfg.Nudges == 0 {
		cfg.Nudges = 1
	}
	seen := map[string]bool{}
	tools := make([]llm.Tool, 0, len(cfg.Tools)+1)
	for _, t := range cfg.Tools {
		if t.Name == "" || seen[t.Name] {
			return nil, fmt.Errorf("new conversation: tool name %q is empty or repeated", t.Name)
		}
		if t.Name == ReportTool {
			continue
		}
		seen[t.Name] = true
		tools = append(tools, t)
	}
	cfg.Tools = append(tools, Report)
	return &Conversation{
		Config:     cfg,
		Messages:   []llm.Message{{Role: llm.User, Text: task}},
		Trajectory: llm.Trajectory{Instruction: task, Calls: []llm.Attempt{}, Provider: cfg.Provider},
	}, nil
}

func limit(format string, args ...any) error {
	return &llm.Error{Kind: llm.KindLimit, Message: fmt.Sprintf(format, args...)}
}

// Request is the next turn. It fails (KindLimit) once MaxTurns turns are
// used, and when the agent has reported or results are missing.
func (c *Conversation) Request() (llm.Request, error) {
	switch {
	case c.Done:
		return llm.Request{}, fmt.Errorf("conversation: the agent has already reported")
	case len(c.Pending) > 0:
		return llm.Request{}, fmt.Errorf("conversation: %d tool results are missing", len(c.Pending))
	case c.Turns >= c.Config.MaxTurns:
		return llm.Request{}, limit("the agent used its %d turns without reporting", c.Config.MaxTurns)
	}
	return llm.Request{
		System:    c.Config.System,
		Messages:  append([]llm.Message(nil), c.Messages...),
		Tools:     c.Config.Tools,
		MaxTokens: c.Config.MaxTokens,
	}, nil
}

// Next is what the model asked for.
type Next struct {
	// Calls are the tool calls to run, in order, each once.
	Calls []llm.ToolCall `json:"calls,omitempty"`
	// Report is the agent's final report. When Calls are given beside it,
	// the conversation is Done once they are all recorded.
	Report *llm.Report `json:"report,omitempty"`
}

// Step reads the model's answer to the turn Request built. It records the
// turn, and returns the calls to run or the report. An answer that cannot
// be used (unknown tool, arguments that are not a JSON object, a report
// that does not follow its schema, a turn cut off by the token limit, no
// tool call after the nudges) is a KindMalformed *llm.Error: not retryable,
// the scenario records an agent error.
func (c *Conversation) Step(resp llm.Response) (Next, error) {
	if c.Done || len(c.Pending) > 0 {
		return Next{}, fmt.Errorf("conversation: step out of order")
	}
	c.Turns++
	c.Usage = c.Usage.Add(resp.Usage)
	c.Trajectory.Usage = c.Usage
	if c.Trajectory.Model == "" {
		c.Trajectory.Model = resp.Model
	}
	c.Trajectory.Turns = append(c.Trajectory.Turns, llm.Turn{Index: c.Turns,
		Sent: append([]llm.Message(nil), c.Messages[c.Sent:]...), MaxTokens: c.Config.MaxTokens, Response: resp})
	c.Sent = len(c.Messages)
	fail := func(format string, args ...any) (Next, error) {
		err := llm.Malformed(c.Trajectory.Provider, format, args...)
		c.Trajectory.Turns[len(c.Trajectory.Turns)-1].Error = err.Error()
		return Next{}, err
	}
	if resp.Usage.OutputTokens > int64(c.Config.MaxTokens) {
		return fail("turn %d used %d output tokens, more than its limit of %d", c.Turns, resp.Usage.OutputTokens, c.Config.MaxTokens)
	}
	if resp.Stop == llm.StopMaxTokens {
		return fail("turn %d was cut off at the limit of %d tokens", c.Turns, c.Config.MaxTokens)
	}
	if resp.Text != "" || len(resp.ToolCalls) > 0 {
		c.Messages = append(c.Messages, resp.Message()) // an empty answer is not sent back
	}
	if len(resp.ToolCalls) == 0 {
		if c.Nudged >= c.Config.Nudges {
			return fail("turn %d ended without a tool call or a %s call", c.Turns, ReportTool)
		}
		c.Nudged++
		c.Messages = append(c.Messages, llm.Message{Role: llm.User,
			Text: "Continue with the tools, and when you are done call " + ReportTool + " to report the outcome."})
		return Next{}, nil
	}
	ids := map[string]bool{}
	var calls []llm.ToolCall
	var report *llm.Report
	for i, call := range resp.ToolCalls {
		if call.ID == "" || ids[call.ID] {
			return fail("tool call %d (%s) has an empty or repeated id", i, call.Name)
		}
		ids[call.ID] = true
		if !c.offers(call.Name) {
			return fail("tool call %q: no such tool", call.Name)
		}
		if _, err := decodeArgs(call.Args); err != nil {
			return fail("tool call %q: %v", call.Name, err)
		}
		if call.Name != ReportTool {
			calls = append(calls, call)
			continue
		}
		if !c.Config.CallsBesideReport {
			// Conversations recorded before CallsBesideReport: the
			// report ends the task at once, calls beside it not run.
			rep, err := parseReport(call.Args)
			if err != nil {
				return fail("%s: %v", ReportTool, err)
			}
			c.Done = true
			c.Trajectory.Report = rep
			return Next{Report: &rep}, nil
		}
		if report != nil {
			return fail("turn %d called %s more than once", c.Turns, ReportTool)
		}
		rep, err := parseReport(call.Args)
		if err != nil {
			return fail("%s: %v", ReportTool, err)
		}
		report = &rep
	}
	if report != nil && len(calls) == 0 {
		c.Done = true
		c.Trajectory.Report = *report
		return Next{Report: report}, nil
	}
	// Every call of the message runs, in order; a report beside them is
	// taken once they are recorded.
	c.Reported = report
	c.Pending = calls
	return Next{Calls: append([]llm.ToolCall(nil), calls...), Report: report}, nil
}

// Abort ends the conversation on a turn that failed for good (the turn
// activity's non-retryable error, or one Step returned): the error is
// recorded in the trajectory, which keeps no report, and no more turns are
// made. The scenario records an agent error.
func (c *Conversation) Abort(err error) {
	if c.Done {
		return
	}
	c.Done = true
	msg := "aborted"
	if err != nil {
		msg = err.Error()
	}
	c.Trajectory.Error = msg
	if n := len(c.Trajectory.Turns); n > 0 && c.Trajectory.Turns[n-1].Index == c.Turns && c.Trajectory.Turns[n-1].Error != "" {
		return // Step already recorded this turn's error
	}
	c.Trajectory.Turns = append(c.Trajectory.Turns, llm.Turn{Index: c.Turns + 1,
		Sent: append([]llm.Message(nil), c.Messages[c.Sent:]...), MaxTokens: c.Config.MaxTokens, Error: msg})
}

func (c *Conversation) offers(name string) bool {
	for _, t := range c.Config.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Record adds the answer of a pending call: the attempt goes into the
// trajectory (its Tool, Args and CallID are filled from the call) and its
// outcome into the tool result the model sees next. When the last pending
// call is recorded, the results become the next user message.
func (c *Conversation) Record(call llm.ToolCall, a llm.Attempt) error {
	idx := -1
	for i, p := range c.Pending {
		if p.ID == call.ID {
			idx = i
			break
		}
	}
	if idx < 0 {
		return fmt.Errorf("conversation: call %q (%s) is not pending", call.ID, call.Name)
	}
	args, err := decodeArgs(call.Args)
	if err != nil {
		return fmt.Errorf("conversation: call %q: %w", call.ID, err)
	}
	a.Tool, a.Args, a.CallID = call.Name, args, call.ID
	if a.Attempt == 0 {
		a.Attempt = 1
		for _, prev := range c.Trajectory.Calls {
			if prev.Tool == a.Tool && sameArgs(prev.Args, a.Args) {
				a.Attempt++
			}
		}
	}
	c.Trajectory.Calls = append(c.Trajectory.Calls, a)
	c.Results = append(c.Results, a.Outcome().Result(call))
	c.Pending = append(c.Pending[:idx], c.Pending[idx+1:]...)
	if len(c.Pending) == 0 {
		c.Messages = append(c.Messages, llm.Message{Role: llm.User, ToolResults: c.Results})
		c.Results = nil
		if c.Reported != nil {
			c.Done = true
			c.Trajectory.Report = *c.Reported
			c.Reported = nil
		}
	}
	return nil
}

// decodeArgs decodes a call's arguments (numbers kept exact).
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("arguments are not a JSON object")
	}
	return m, nil
}

// sameArgs compares arguments apart from an idempotency key.
func sameArgs(a, b map[string]any) bool {
	strip := func(m map[string]any) string {
		n := map[string]any{}
		for k, v := range m {
			if k != "idempotency_key" {
				n[k] = v
			}
		}
		out, _ := json.Marshal(n)
		return string(out)
	}
	return strip(a) == strip(b)
}

// parseReport reads report_result's arguments.
func parseReport(raw json.RawMessage) (llm.Report, error) {
	var r struct {
		Claimed *string `json:"claimed"`
		Message string  `json:"message"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return llm.Report{}, fmt.Errorf("arguments do not decode: %v", err)
	}
	if r.Claimed == nil {
		return llm.Report{}, fmt.Errorf("\"claimed\" is missing")
	}
	switch *r.Claimed {
	case commitlayer.ClaimSuccess, commitlayer.ClaimFailure:
	default:
		return llm.Report{}, fmt.Errorf("\"claimed\" is %q, want success or failure", *r.Claimed)
	}
	return llm.Report{Status: *r.Claimed, Message: r.Message}, nil
}
