// Package otlpingest turns OpenTelemetry traces into CommitLayer actions:
// it reads an OTLP/HTTP trace export (protobuf or JSON, gzip or not),
// finds the GenAI execute_tool spans (gen_ai.operation.name=execute_tool,
// gen_ai.tool.name, gen_ai.tool.call.arguments and .result) and maps each
// through the tenant's contract bindings into the actions to record,
// idempotent on (trace id, span id). It answers in OTLP's shapes: the
// ExportTraceServiceResponse with partial_success, or a google.rpc.Status
// in the request's encoding. The API (api/traces.go) serves it as
// POST /v1/traces; this package does no I/O beyond the request body.
package otlpingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
)

// The GenAI and general semantic-convention attributes read.
const (
	AttrOperation     = "gen_ai.operation.name"
	AttrToolName      = "gen_ai.tool.name"
	AttrToolCallID    = "gen_ai.tool.call.id"
	AttrToolArguments = "gen_ai.tool.call.arguments"
	AttrToolResult    = "gen_ai.tool.call.result"
	AttrAgentName     = "gen_ai.agent.name"
	AttrErrorType     = "error.type"
	AttrServiceName   = "service.name"
	// AttrMCPMethod is the MCP conventions' method: an MCP client's (or
	// server's) tools/call span is a tool call even without
	// gen_ai.operation.name, which the MCP conventions only recommend.
	AttrMCPMethod = "mcp.method.name"

	OpExecuteTool = "execute_tool"
	OpInvokeAgent = "invoke_agent"
	MCPToolsCall  = "tools/call"
	maxValueDepth = 64 // nesting of arguments and results
)

// ToolCall is one execute_tool span.
type ToolCall struct {
	TraceID string // hex
	SpanID  string // hex
	Tool    string
	CallID  string
	// Args and Result are the call's arguments and result as objects (a
	// result that is not a JSON object is {"text": …}); nil when the span
	// has none.
	Args, Result map[string]any
	// ArgsError says why the arguments could not be read, if so.
	ArgsError string
	Start     time.Time
	Agent     string
	Claim     commitlayer.Claim
}

// ToolCalls finds the execute_tool spans of td, in request order, and
// counts the other spans. A span is a tool call when its
// gen_ai.operation.name is execute_tool (or, without that attribute, when
// its name is "execute_tool {tool}" or it is an MCP tools/call span),
// unless it is an MCP server's span (kind SERVER), or lies inside an
// execute_tool span of the same tool in the request (the same call
// reported again by an MCP client span, counted with the others). Its agent is its own
// gen_ai.agent.name, else the nearest invoke_agent ancestor's in the same
// request, else its resource's service.name.
func ToolCalls(td ptrace.Traces) (calls []ToolCall, others int) {
	type node struct {
		parent string
		op     string
		agent  string
		tool   string // of an execute_tool span
	}
	nodes := map[string]node{}
	key := func(t pcommon.TraceID, s pcommon.SpanID) string { return t.String() + "/" + s.String() }
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				n := node{op: str(sp.Attributes(), AttrOperation), agent: str(sp.Attributes(), AttrAgentName)}
				if !sp.ParentSpanID().IsEmpty() {
					n.parent = key(sp.TraceID(), sp.ParentSpanID())
				}
				if n.op == "" && strings.HasPrefix(sp.Name(), OpInvokeAgent+" ") {
					n.op = OpInvokeAgent
				}
				if c, ok := toolCall(sp); ok {
					n.op, n.tool = OpExecuteTool, c.Tool
				}
				nodes[key(sp.TraceID(), sp.SpanID())] = n
			}
		}
	}
	agentOf := func(start string) string {
		k := start
		for hops := 0; k != "" && hops < 64; hops++ {
			n, ok := nodes[k]
			if !ok {
				return ""
			}
			if n.op == OpInvokeAgent && n.agent != "" {
				return n.agent
			}
			k = n.parent
		}
		return ""
	}
	// insideSameCall reports whether an ancestor is an execute_tool span
	// of the same tool: one call reported twice, by the agent's framework
	// and by its MCP client (whose tools/call span carries
	// gen_ai.operation.name=execute_tool too). The outer one counts.
	insideSameCall := func(start, tool string) bool {
		k := start
		for hops := 0; k != "" && hops < 64; hops++ {
			n, ok := nodes[k]
			if !ok {
				return false
			}
			if n.op == OpExecuteTool && n.tool == tool {
				return true
			}
			k = n.parent
		}
		return false
	}
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		service := str(rs.Resource().Attributes(), AttrServiceName)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				call, ok := toolCall(sp)
				if !ok || !sp.ParentSpanID().IsEmpty() && insideSameCall(key(sp.TraceID(), sp.ParentSpanID()), call.Tool) {
					others++
					continue
				}
				call.Agent = str(sp.Attributes(), AttrAgentName)
				if call.Agent == "" && !sp.ParentSpanID().IsEmpty() {
					call.Agent = agentOf(key(sp.TraceID(), sp.ParentSpanID()))
				}
				if call.Agent == "" {
					call.Agent = service
				}
				calls = append(calls, call)
			}
		}
	}
	return calls, others
}

func toolCall(sp ptrace.Span) (ToolCall, bool) {
	attrs := sp.Attributes()
	op := str(attrs, AttrOperation)
	name := strings.TrimSpace(sp.Name())
	switch {
	case sp.Kind() == ptrace.SpanKindServer && str(attrs, AttrMCPMethod) != "":
		// An MCP server's span of a call is the tool's side of it, often
		// exported by another process than the agent's (so its parent,
		// the agent's call, is not in the same request): the call is the
		// agent's client or framework span.
		return ToolCall{}, false
	case op == OpExecuteTool:
	case op != "":
		return ToolCall{}, false
	case name == OpExecuteTool || strings.HasPrefix(name, OpExecuteTool+" "):
	case str(attrs, AttrMCPMethod) == MCPToolsCall:
	default:
		return ToolCall{}, false
	}
	// The tool: gen_ai.tool.name, else the span name's target
	// ("execute_tool {tool}", an MCP span's "tools/call {tool}").
	tool := strings.TrimSpace(str(attrs, AttrToolName))
	if tool == "" {
		for _, prefix := range []string{OpExecuteTool, MCPToolsCall} {
			if rest, ok := strings.CutPrefix(name, prefix); ok && (rest == "" || rest[0] == ' ') {
				tool = strings.TrimSpace(rest)
				break
			}
		}
	}
	c := ToolCall{Tool: tool, CallID: str(attrs, AttrToolCallID), Start: sp.StartTimestamp().AsTime().UTC()}
	if !sp.TraceID().IsEmpty() {
		c.TraceID = sp.TraceID().String()
	}
	if !sp.SpanID().IsEmpty() {
		c.SpanID = sp.SpanID().String()
	}
	if v, ok := attrs.Get(AttrToolArguments); ok {
		m, err := object(v)
		switch {
		case err != nil:
			c.ArgsError = err.Error()
		case m == nil:
			c.ArgsError = notObject(v)
		}
		c.Args = m
	}
	if v, ok := attrs.Get(AttrToolResult); ok {
		if m, err := object(v); err == nil && m != nil {
			c.Result = m
		} else {
			c.Result = map[string]any{"text": strings.ToValidUTF8(v.AsString(), "\uFFFD")}
		}
	}
	errType := str(attrs, AttrErrorType)
	switch {
	case sp.Status().Code() == ptrace.StatusCodeError:
		msg := sp.Status().Message()
		if msg == "" {
			msg = errType
		}
		c.Claim = commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: msg}
	case errType != "":
		c.Claim = commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: errType}
	default:
		c.Claim = commitlayer.Claim{Status: commitlayer.ClaimSuccess, Message: sp.Status().Message()}
	}
	return c, true
}

// object reads an attribute as a JSON object, as the GenAI conventions
// let instrumentations record gen_ai.tool.call.arguments and .result: a
// structured value (an AnyValue kvlist), or a string holding the JSON (one
// encoded twice, a JSON string holding the object, is read too; so are
// bytes holding it). A string that is not JSON, or a value nested deeper
// than maxValueDepth, is an error; any other value gives nil.
func object(v pcommon.Value) (map[string]any, error) {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		raw, err := fromValue(v, 0)
		if err != nil {
			return nil, err
		}
		n, err := commitlayer.NormalizeValue(raw)
		if err != nil {
			return nil, err
		}
		return n.(map[string]any), nil
	case pcommon.ValueTypeStr:
		return objectText(v.Str(), true)
	case pcommon.ValueTypeBytes:
		return objectText(string(v.Bytes().AsRaw()), false)
	}
	return nil, nil
}

func objectText(text string, again bool) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("is empty")
	}
	if !utf8.ValidString(text) {
		return nil, errors.New("is not UTF-8 text")
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, errors.New("is not JSON")
	}
	if dec.More() {
		return nil, errors.New("holds more than one JSON value")
	}
	if s, ok := x.(string); ok && again {
		if m, err := objectText(s, false); err == nil && m != nil {
			return m, nil
		}
		return nil, nil
	}
	m, ok := x.(map[string]any)
	if !ok {
		return nil, nil
	}
	if depth(m, 0) > maxValueDepth {
		return nil, fmt.Errorf("is nested deeper than %d levels", maxValueDepth)
	}
	n, err := commitlayer.NormalizeValue(m)
	if err != nil {
		return nil, err
	}
	return n.(map[string]any), nil
}

// fromValue is an AnyValue as a JSON value: bytes as their base64 (as
// OTLP/JSON writes them), whole doubles as integers, the rest as pdata's
// AsRaw.
func fromValue(v pcommon.Value, d int) (any, error) {
	if d > maxValueDepth {
		return nil, fmt.Errorf("is nested deeper than %d levels", maxValueDepth)
	}
	switch v.Type() {
	case pcommon.ValueTypeMap:
		out := make(map[string]any, v.Map().Len())
		var err error
		v.Map().Range(func(k string, e pcommon.Value) bool {
			out[k], err = fromValue(e, d+1)
			return err == nil
		})
		return out, err
	case pcommon.ValueTypeSlice:
		out := make([]any, v.Slice().Len())
		for i := range out {
			var err error
			if out[i], err = fromValue(v.Slice().At(i), d+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case pcommon.ValueTypeBytes:
		return base64.StdEncoding.EncodeToString(v.Bytes().AsRaw()), nil
	case pcommon.ValueTypeDouble:
		// A whole double is the integer JSON text would give: 2500.0
		// compares equal to 2500 as money.
		if f := v.Double(); f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), nil
		}
	}
	return v.AsRaw(), nil
}

func depth(x any, d int) int {
	if d > maxValueDepth {
		return d
	}
	deepest := d
	switch y := x.(type) {
	case map[string]any:
		for _, e := range y {
			deepest = max(deepest, depth(e, d+1))
		}
	case []any:
		for _, e := range y {
			deepest = max(deepest, depth(e, d+1))
		}
	}
	return deepest
}

// notObject says what an arguments value that is no object is.
func notObject(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeStr, pcommon.ValueTypeBytes:
		return "holds JSON that is not an object"
	case pcommon.ValueTypeSlice:
		return "is an array, not an object"
	case pcommon.ValueTypeEmpty:
		return "is empty, not an object"
	}
	return "is a " + strings.ToLower(v.Type().String()) + ", not an object"
}

func str(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// Recording is one action to record for a bound tool call, with the
// Idempotency-Key and request hash that make an exporter's retry record
// nothing new.
type Recording struct {
	Action commitlayer.Action
	Key    string
	Hash   []byte
}

// Map turns a tool call into the actions its bindings record: none when no
// contract binds its tool (bound is false). An error (the call cannot be
// identified, its arguments are unreadable, or a binding cannot be
// evaluated) means the span is rejected; the matches of the other
// bindings are still returned.
func Map(c ToolCall, b *contracts.Bindings) (recs []Recording, bound bool, err error) {
	if !b.Bound(c.Tool) {
		return nil, false, nil
	}
	switch {
	case c.TraceID == "" || c.SpanID == "":
		return nil, true, fmt.Errorf("span of tool %s has no trace id or span id", commitlayer.Clip(c.Tool, 64))
	case c.ArgsError != "":
		return nil, true, fmt.Errorf("span %s of tool %s: %s %s", c.SpanID, commitlayer.Clip(c.Tool, 64), AttrToolArguments, c.ArgsError)
	case c.Start.Unix() <= 0:
		return nil, true, fmt.Errorf("span %s of tool %s has no start time", c.SpanID, commitlayer.Clip(c.Tool, 64))
	case c.Agent == "":
		return nil, true, fmt.Errorf("span %s of tool %s names no agent (%s on an invoke_agent parent, or the resource's %s)",
			c.SpanID, commitlayer.Clip(c.Tool, 64), AttrAgentName, AttrServiceName)
	}
	matches, merr := b.Match(c.Tool, c.Args, c.Result)
	switch {
	case merr != nil && c.Args == nil:
		merr = fmt.Errorf("span %s: %w (the span has no %s: most instrumentations record it only when content capture is opted in)",
			c.SpanID, merr, AttrToolArguments)
	case merr != nil:
		merr = fmt.Errorf("span %s: %w", c.SpanID, merr)
	}
	trace, _ := json.Marshal([]map[string]string{{ // strings only: cannot fail
		"source": "otlp", "trace_id": c.TraceID, "span_id": c.SpanID, "tool": c.Tool, "tool_call_id": c.CallID,
	}})
	for _, m := range matches {
		a := commitlayer.Action{
			Contract:    m.Contract.ID(),
			Agent:       c.Agent,
			Subject:     m.Subject,
			Params:      m.Params,
			RequestedAt: c.Start,
			Claim:       commitlayer.Claim{Status: c.Claim.Status, Message: commitlayer.Clip(c.Claim.Message, maxClaimMessage)},
			Trace:       trace,
		}
		if err := storable(&a); err != nil {
			merr = errors.Join(merr, fmt.Errorf("span %s, contract %s: %w", c.SpanID, m.Contract.ID(), err))
			continue
		}
		key := fmt.Sprintf("otlp/%s/%s/%s/%d", c.TraceID, c.SpanID, m.Contract.ID(), m.Binding)
		sum := sha256.Sum256([]byte(key))
		recs = append(recs, Recording{Action: a, Key: key, Hash: sum[:]})
	}
	return recs, true, merr
}

// maxClaimMessage bounds the claim message taken from a span's status.
const maxClaimMessage = 2048

// storable checks what the store needs of an action built from a span:
// the action's own rules, and no NUL character anywhere (PostgreSQL text
// cannot hold one; protobuf strings may).
func storable(a *commitlayer.Action) error {
	if err := a.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode action: %w", err)
	}
	if bytes.Contains(b, []byte(`\u0000`)) {
		return errors.New("the span holds a NUL character, which cannot be stored")
	}
	// Protobuf strings are not checked as UTF-8 by every decoder; JSON
	// would mend them silently and PostgreSQL refuse them.
	if !utf8Text(a.Agent) || !utf8Text(string(a.Subject)) || !utf8Text(a.Claim.Message) || !utf8Text(map[string]any(a.Params)) {
		return errors.New("the span holds text that is not UTF-8")
	}
	return nil
}

// utf8Text reports whether every string in v (keys too) is UTF-8.
func utf8Text(v any) bool {
	switch x := v.(type) {
	case string:
		return utf8.ValidString(x)
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) || !utf8Text(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !utf8Text(e) {
				return false
			}
		}
	}
	return true
}
