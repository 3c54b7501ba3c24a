// Package llm is CommitLayer's one small interface to a language model, with
// adapters on the official SDKs of Anthropic (Messages with tools), OpenAI
// (Chat Completions function calling) and Google (Gemini function
// declarations).
//
// A Provider makes one turn: a system prompt, the messages so far (text,
// tool calls and tool results), the tools as JSON Schemas, a token limit and
// optionally a JSON Schema the answer must follow. It returns the model's
// text, its tool calls, why it stopped, the tokens used and the model that
// answered. Every type here is plain data that encodes to JSON, so a
// Temporal workflow can carry a conversation in its history.
//
// Each adapter is built per client with an explicit base URL and API key,
// with the SDK's own retries turned off (Temporal retries a turn instead;
// see Error and package llmtemporal) and without reading the provider's
// environment variables (FromEnv reads the key of the one provider a run
// names). Keys never appear in errors: every message an adapter returns is
// scrubbed of its key.
//
// The pieces that build on this one: llm/loop (the model-driven agent's
// conversation, one Step per turn), llm/fake (wire-faithful fake providers
// driven by a deterministic policy), llm/judge (trace-only judges) and
// llm/llmtemporal (a turn as a Temporal activity).
package llm

import (
	"context"
	"encoding/json"
)

// Provider names.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Google    = "google"
)

// Providers lists the provider names FromEnv and New accept.
var Providers = []string{Anthropic, OpenAI, Google}

// Provider makes one model turn.
type Provider interface {
	Complete(ctx context.Context, req Request) (Response, error)
	// Name is the provider's name (Anthropic, OpenAI, Google).
	Name() string
	// Model is the model every turn asks for.
	Model() string
}

// Role is who wrote a message.
type Role string

// Roles. Tool results travel in user messages, as they do on the wire of
// Anthropic and Gemini; the OpenAI adapter turns each into a tool message.
const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// Message is one message of a conversation.
type Message struct {
	Role Role   `json:"role"`
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolResults answer the previous assistant message's calls.
	ToolResults []ToolResult `json:"tool_results,omitempty"`
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	// ID is the provider's id of the call (tool_use id, tool_call id, or
	// the function call id Gemini gives, which may be empty).
	ID   string `json:"id"`
	Name string `json:"name"`
	// Args is the JSON object of arguments.
	Args json.RawMessage `json:"args"`
	// Signature is an opaque token some models attach to a call (Gemini's
	// thought signature) that must be sent back with it.
	Signature []byte `json:"signature,omitempty"`
}

// ToolResult is what a tool call came back with, as the model sees it.
type ToolResult struct {
	CallID string `json:"call_id"`
	// Name is the tool's name (Gemini matches function responses by name).
	Name    string `json:"name"`
	Content string `json:"content"`
	// IsError marks a call that failed (a non-2xx answer, a timeout).
	IsError bool `json:"is_error,omitempty"`
}

// Tool is a tool the model may call.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Schema is the JSON Schema of the arguments: an object schema.
	Schema json.RawMessage `json:"schema"`
}

// ResponseSchema asks for an answer that is a JSON document following
// Schema (structured output).
type ResponseSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

// Request is one turn.
type Request struct {
	System    string    `json:"system,omitempty"`
	Messages  []Message `json:"messages"`
	Tools     []Tool    `json:"tools,omitempty"`
	MaxTokens int       `json:"max_tokens"`
	// Temperature, when set, is sent to providers that take it. The
	// Anthropic API (version 2026-10-21, the v2 SDK's) no longer accepts
	// sampling parameters, so its adapter leaves it out.
	Temperature *float64        `json:"temperature,omitempty"`
	Response    *ResponseSchema `json:"response,omitempty"`
}

// StopReason is why the model stopped, across providers.
type StopReason string

// Stop reasons.
const (
	StopEnd       StopReason = "end_turn"   // finished its answer
	StopToolUse   StopReason = "tool_use"   // wants its tool calls run
	StopMaxTokens StopReason = "max_tokens" // cut off by the token limit
	StopRefusal   StopReason = "refusal"    // refused or was filtered
	StopOther     StopReason = "other"
)

// Response is the model's answer to one turn.
type Response struct {
	ID        string     `json:"id,omitempty"`
	Model     string     `json:"model"`
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Stop      StopReason `json:"stop"`
	// RawStop is the provider's own stop reason.
	RawStop string `json:"raw_stop,omitempty"`
	Usage   Usage  `json:"usage"`
}

// Message is the response as the assistant message to append to the
// conversation.
func (r Response) Message() Message {
	return Message{Role: Assistant, Text: r.Text, ToolCalls: r.ToolCalls}
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens}
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }
