package otlpingest

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The GenAI and MCP semantic conventions' names the dialects read.
const (
	attrOperation  = "gen_ai.operation.name"
	attrToolName   = "gen_ai.tool.name"
	attrToolCallID = "gen_ai.tool.call.id"
	attrAgentName  = "gen_ai.agent.name"
	attrMCPMethod  = "mcp.method.name"
	opExecuteTool  = "execute_tool"
	opInvokeAgent  = "invoke_agent"
	mcpToolsCall   = "tools/call"
)

// A Dialect is how one instrumentation writes a tool call on a span: how
// to recognise the span, and where each part of the call is. ToolCalls
// reads a span through the first dialect in Dialects that recognises it.
type Dialect struct {
	Name string
	// Is recognises the dialect's tool-call spans (any one of these); a
	// span that also matches one of Not is no call.
	Is, Not []Match
	// Where each part is: the first of its fields the span has. The tool
	// may also be the rest of the span's name after one of ToolInName
	// ("execute_tool refund").
	Tool, CallID, Args, Result []Field
	ToolInName                 []string
	// Agent is the first of these found, else the resource's service.name.
	Agent []Field
}

// Match tests a span: attribute Attr is Value (set at all when Value is
// "", begins with it when Value ends in '*'), its name is Name (the same
// '*' rule), attribute Unset is not set, and with Server it is of kind
// SERVER. Empty parts hold.
type Match struct {
	Attr, Value, Name, Unset string
	Server                   bool
}

// Field is where a value is: attribute Attr of the span or, with Of, of
// its nearest ancestor in the request that Of matches. With Path it is
// the value at that path ("output.kwargs.content", "args.0") in the JSON
// the attribute holds. Mime names the attribute holding the value's
// media type: a value said to be text (text/plain) is never read as JSON.
type Field struct {
	Attr, Path, Mime string
	Of               *Match
}

func attrs(keys ...string) []Field {
	out := make([]Field, len(keys))
	for i, k := range keys {
		out[i] = Field{Attr: k}
	}
	return out
}

// Dialects are the tool-call spans CommitLayer reads, most specific first
// (pydantic-ai's older spans may carry gen_ai.operation.name too).
var Dialects = []Dialect{{
	// pydantic-ai before its instrumentation version 3.
	Name:   "pydantic-ai",
	Is:     []Match{{Name: "running tool"}},
	Tool:   attrs(attrToolName),
	CallID: attrs(attrToolCallID),
	Args:   attrs("tool_arguments"),
	Result: attrs("tool_response"),
	Agent:  []Field{{Attr: attrAgentName}, {Attr: "agent_name", Of: &Match{Name: "agent run"}}},
}, {
	// The OpenTelemetry GenAI semantic conventions (and older spellings of
	// the tool's arguments and result, Google ADK's among them), with the
	// MCP client's tools/call span, whose gen_ai.operation.name the MCP
	// conventions only recommend.
	Name: "genai",
	Is: []Match{{Attr: attrOperation, Value: opExecuteTool}, {Name: opExecuteTool, Unset: attrOperation},
		{Name: opExecuteTool + " *", Unset: attrOperation}, {Attr: attrMCPMethod, Value: mcpToolsCall, Unset: attrOperation}},
	// An MCP server's span is the tool's side of a call, often exported by
	// another process than the agent's: the call is the agent's span.
	Not:        []Match{{Attr: attrMCPMethod, Server: true}},
	Tool:       attrs(attrToolName),
	ToolInName: []string{opExecuteTool, mcpToolsCall},
	CallID:     attrs(attrToolCallID),
	Args: attrs("gen_ai.tool.call.arguments", "gen_ai.tool.arguments", "gen_ai.tool.input",
		"gcp.vertex.agent.tool_call_args"), // Google ADK
	Result: attrs("gen_ai.tool.call.result", "gen_ai.tool.result", "gen_ai.tool.output", "gen_ai.tool.message",
		"gcp.vertex.agent.tool_response"),
	Agent: []Field{{Attr: attrAgentName}, {Attr: attrAgentName, Of: &Match{Attr: attrOperation, Value: opInvokeAgent}},
		{Attr: attrAgentName, Of: &Match{Name: opInvokeAgent + " *", Unset: attrOperation}}},
}, {
	// The Vercel AI SDK's own spans (AI SDK 6, and 7's LegacyOpenTelemetry).
	Name:   "ai-sdk",
	Is:     []Match{{Attr: "ai.operationId", Value: "ai.toolCall"}},
	Tool:   attrs("ai.toolCall.name"),
	CallID: attrs("ai.toolCall.id"),
	Args:   attrs("ai.toolCall.args"),
	Result: attrs("ai.toolCall.result"),
	Agent:  attrs("ai.telemetry.functionId"),
}, {
	// OpenInference (Arize): LangChain.js, the OpenAI Agents SDK bridge….
	// LangChain's tool output is a serialized ToolMessage; an agent handoff
	// is a TOOL span too.
	Name:   "openinference",
	Is:     []Match{{Attr: "openinference.span.kind", Value: "TOOL"}},
	Not:    []Match{{Attr: "tool.name", Value: "handoff_to_*"}},
	Tool:   attrs("tool.name"),
	CallID: []Field{{Attr: "tool_call.id"}, {Attr: "output.value", Path: "output.kwargs.tool_call_id"}},
	Args:   []Field{{Attr: "input.value", Mime: "input.mime_type"}},
	Result: []Field{{Attr: "output.value", Path: "output.kwargs.content", Mime: "output.mime_type"},
		{Attr: "output.value", Mime: "output.mime_type"}},
	Agent: []Field{{Attr: "metadata", Path: "lc_agent_name"},
		{Attr: "graph.node.id", Of: &Match{Attr: "openinference.span.kind", Value: "AGENT"}}},
}, {
	// OpenLLMetry (Traceloop): input is {"args":[…],"kwargs":{…}}.
	Name:   "openllmetry",
	Is:     []Match{{Attr: "traceloop.span.kind", Value: "tool"}},
	Tool:   attrs("traceloop.entity.name"),
	Args:   []Field{{Attr: "traceloop.entity.input", Path: "kwargs"}, {Attr: "traceloop.entity.input", Path: "args.0"}},
	Result: attrs("traceloop.entity.output"),
	Agent: []Field{{Attr: attrAgentName},
		{Attr: "traceloop.entity.name", Of: &Match{Attr: "traceloop.span.kind", Value: "agent"}}},
}}

// dialectOf returns the dialect whose tool call sp is, if any.
func dialectOf(sp ptrace.Span) (*Dialect, bool) {
	for i := range Dialects {
		d := &Dialects[i]
		if matchAny(sp, d.Is) && !matchAny(sp, d.Not) {
			return d, true
		}
	}
	return nil, false
}

func matchAny(sp ptrace.Span, ms []Match) bool {
	for _, m := range ms {
		if m.match(sp) {
			return true
		}
	}
	return false
}

func (m Match) match(sp ptrace.Span) bool {
	a := sp.Attributes()
	if m.Attr != "" {
		v, ok := a.Get(m.Attr)
		if !ok || m.Value != "" && !like(v.AsString(), m.Value) {
			return false
		}
	}
	if m.Unset != "" {
		if _, ok := a.Get(m.Unset); ok {
			return false
		}
	}
	return (m.Name == "" || like(strings.TrimSpace(sp.Name()), m.Name)) && (!m.Server || sp.Kind() == ptrace.SpanKindServer)
}

// like is s == pattern, or s begins with pattern's text before a final '*'.
func like(s, pattern string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(s, p)
	}
	return s == pattern
}

// at follows a dotted path (object keys, array indexes) into x.
func at(x any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		switch y := x.(type) {
		case map[string]any:
			if x = y[k]; x == nil {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(y) {
				return nil, false
			}
			x = y[i]
		default:
			return nil, false
		}
	}
	return x, true
}
