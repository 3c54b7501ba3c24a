// Package otlpingest turns OpenTelemetry traces into CommitLayer actions:
// it reads an OTLP/HTTP trace export strictly and within bounds, reads its
// tool-execution spans through the dialect of the instrumentation that
// wrote them (Dialects) and maps each through the tenant's contract
// bindings into the actions to record, idempotent on (trace id, span id).
// It answers in OTLP's shapes (ExportTraceServiceResponse, google.rpc.Status)
// and does no I/O beyond the request body.
package otlpingest

import (
	"cmp"
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
	"github.com/commitlayer/commitlayer/service"
)

// maxValueDepth bounds the nesting of arguments and results read from text.
const maxValueDepth = 64

// ToolCall is one tool-execution span, read through its dialect: a plain
// value for whatever records it.
type ToolCall struct {
	TraceID, SpanID string // hex
	Dialect         string // the Dialect it was read through
	Tool, CallID    string
	// Args and Result are the call's arguments and result as objects (a
	// result that is not a JSON object is {"text": …}); nil when the span
	// has none. ArgsKey names the attribute the arguments were read from
	// (or the first the dialect reads them from), ArgsError why they could
	// not be read.
	Args, Result       map[string]any
	ArgsKey, ArgsError string
	// Err says why a span that looks like a tool call cannot be read at
	// all (no tool name; a bound tool's name on a span of no dialect).
	Err   string
	Start time.Time
	Agent string
	Claim commitlayer.Claim
}

// maxHops bounds a walk up a span's ancestors.
const maxHops = 64

// ToolCalls reads the tool-execution spans of td, in request order, and
// counts the other spans. A span inside a call of the same tool in the
// request is not read (one call reported twice, by an agent framework and
// its MCP client: the outer span counts). A span of no dialect named like
// a tool bound says (nil: none) is a call that cannot be read (Err), so
// that it is rejected, not dropped.
func ToolCalls(td ptrace.Traces, bound func(tool string) bool) (calls []ToolCall, others int) {
	type node struct {
		span    ptrace.Span
		parent  string
		d       *Dialect
		tool    string
		service string
	}
	nodes := map[string]*node{}
	var order []*node
	key := func(t pcommon.TraceID, s pcommon.SpanID) string { return t.String() + "/" + s.String() }
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		service := str(rss.At(i).Resource().Attributes(), "service.name")
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				n := &node{span: sp, service: service}
				if !sp.ParentSpanID().IsEmpty() {
					n.parent = key(sp.TraceID(), sp.ParentSpanID())
				}
				if n.d, _ = dialectOf(sp); n.d != nil {
					n.tool = toolName(sp, n.d)
				}
				nodes[key(sp.TraceID(), sp.SpanID())] = n
				order = append(order, n)
			}
		}
	}
	// up calls f on n's ancestors in the request, nearest first, until it
	// returns true.
	up := func(n *node, f func(*node) bool) {
		for hops := 0; n.parent != "" && hops < maxHops; hops++ {
			if n = nodes[n.parent]; n == nil || f(n) {
				return
			}
		}
	}
	insideCall := func(n *node, tool string) (inside bool) {
		up(n, func(a *node) bool { inside = a.d != nil && a.tool == tool; return inside })
		return inside
	}
	for _, n := range order {
		sp := n.span
		if n.d == nil {
			name := strings.TrimSpace(sp.Name())
			if bound == nil || !bound(name) || insideCall(n, name) {
				others++
				continue
			}
			c := newCall(sp, "")
			c.Tool = name
			c.Err = fmt.Sprintf("span %s is named %q, a bound tool, but is in no dialect CommitLayer reads (%s)",
				c.SpanID, commitlayer.Clip(name, 64), names(Dialects, func(d Dialect) string { return d.Name }))
			calls = append(calls, c)
			continue
		}
		if n.tool != "" && insideCall(n, n.tool) {
			others++
			continue
		}
		c := newCall(sp, n.d.Name)
		c.Tool = n.tool
		if c.Tool == "" {
			c.Err = fmt.Sprintf("span %s (%s): no tool name (%s)", c.SpanID, n.d.Name, names(n.d.Tool, func(f Field) string { return f.Attr }))
		}
		c.CallID = first(sp.Attributes(), n.d.CallID)
		c.readArgs(sp.Attributes(), n.d.Args)
		c.readResult(sp.Attributes(), n.d.Result)
		for _, f := range n.d.Agent {
			if f.Of == nil {
				c.Agent = first(sp.Attributes(), []Field{f})
			} else {
				up(n, func(a *node) bool {
					if f.Of.match(a.span) {
						c.Agent = first(a.span.Attributes(), []Field{f})
					}
					return c.Agent != ""
				})
			}
			if c.Agent != "" {
				break
			}
		}
		if c.Agent == "" {
			c.Agent = n.service
		}
		calls = append(calls, c)
	}
	return calls, others
}

func newCall(sp ptrace.Span, dialect string) ToolCall {
	c := ToolCall{Dialect: dialect, Start: sp.StartTimestamp().AsTime().UTC()}
	if !sp.TraceID().IsEmpty() {
		c.TraceID = sp.TraceID().String()
	}
	if !sp.SpanID().IsEmpty() {
		c.SpanID = sp.SpanID().String()
	}
	errType := str(sp.Attributes(), "error.type")
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
	return c
}

// toolName is the dialect's tool name of sp: its field, else the span
// name's target ("execute_tool {tool}", an MCP span's "tools/call {tool}").
func toolName(sp ptrace.Span, d *Dialect) string {
	if t := strings.TrimSpace(first(sp.Attributes(), d.Tool)); t != "" {
		return t
	}
	name := strings.TrimSpace(sp.Name())
	for _, prefix := range d.ToolInName {
		if rest, ok := strings.CutPrefix(name, prefix); ok && (rest == "" || rest[0] == ' ') {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// first is the text of the first of fields the attributes hold.
func first(attrs pcommon.Map, fields []Field) string {
	for _, f := range fields {
		x, _, _ := f.value(attrs)
		if t, ok := x.(text); ok {
			x = string(t)
		}
		if s, _ := x.(string); s != "" {
			return s
		}
	}
	return ""
}

func (c *ToolCall) readArgs(attrs pcommon.Map, fields []Field) {
	c.ArgsKey = fields[0].Attr
	for _, f := range fields {
		x, ok, err := f.value(attrs)
		if !ok {
			continue
		}
		c.ArgsKey = f.Attr
		switch y := x.(type) {
		case map[string]any:
			c.Args = y
		case text:
			switch {
			case strings.TrimSpace(string(y)) == "":
				c.ArgsError = "is empty"
			case f.Path != "":
				c.ArgsError = "is a string, not an object"
			case f.Mime != "" && str(attrs, f.Mime) != "":
				c.ArgsError = fmt.Sprintf("is %s (%s), not the arguments as a JSON object", str(attrs, f.Mime), f.Mime)
			default:
				c.ArgsError = "is not JSON"
			}
		case []any:
			c.ArgsError = "is an array, not an object"
		default:
			c.ArgsError = "holds JSON that is not an object"
		}
		if err != nil {
			c.Args, c.ArgsError = nil, err.Error()
		}
		if f.Path != "" && c.ArgsError != "" {
			c.ArgsError = f.Path + " " + c.ArgsError
		}
		return
	}
	if _, ok := attrs.Get(c.ArgsKey); ok { // there, but none of the paths
		var paths []string
		for _, f := range fields {
			paths = append(paths, f.Path)
		}
		c.ArgsError = "has no object at " + strings.Join(paths, " or ")
	}
}

func (c *ToolCall) readResult(attrs pcommon.Map, fields []Field) {
	for _, f := range fields {
		x, ok, err := f.value(attrs)
		if !ok {
			continue
		}
		switch y := x.(type) {
		case map[string]any:
			if err == nil {
				c.Result = y
				return
			}
		case text:
			c.Result = map[string]any{"text": string(y)}
			return
		case string:
			c.Result = map[string]any{"text": y}
			return
		}
		v, _ := attrs.Get(f.Attr)
		c.Result = map[string]any{"text": strings.ToValidUTF8(v.AsString(), "\uFFFD")}
		return
	}
}

// text is an attribute's text that is not read as JSON.
type text string

// value reads field f (Of aside) from attrs: the attribute as JSON when it
// is (a structured value; text that parses as JSON unless its media type
// says otherwise, a JSON string holding an object or array read once
// more), else as text; then the value at f.Path, read the same way when it
// is a string. found is false when the attribute or the path is not
// there (or the path leads to an empty object).
func (f Field) value(attrs pcommon.Map) (x any, found bool, err error) {
	v, ok := attrs.Get(f.Attr)
	if !ok {
		return nil, false, nil
	}
	switch v.Type() {
	case pcommon.ValueTypeStr, pcommon.ValueTypeBytes:
		s := v.Str()
		if v.Type() == pcommon.ValueTypeBytes {
			s = string(v.Bytes().AsRaw())
		}
		if !utf8.ValidString(s) {
			return text(s), true, errors.New("is not UTF-8 text")
		}
		if mt := str(attrs, f.Mime); mt != "" && !strings.Contains(strings.ToLower(mt), "json") {
			x = text(s)
		} else if x, err = fromText(s); err != nil {
			return nil, true, err
		}
	default:
		x = fromValue(v)
	}
	if f.Path != "" {
		if x, ok = at(x, f.Path); !ok {
			return nil, false, nil
		}
		if m, ok := x.(map[string]any); ok && len(m) == 0 {
			return nil, false, nil
		}
		if s, ok := x.(string); ok {
			if x, err = fromText(s); err != nil {
				return nil, true, err
			}
		}
	}
	if m, ok := x.(map[string]any); ok {
		n, err := commitlayer.NormalizeValue(m)
		if err != nil {
			return m, true, err
		}
		x = n
	}
	return x, true, nil
}

// fromText is s's JSON value when s is JSON (a JSON string holding an
// object or array is read once more: "a JSON-encoded string becomes the
// string"), else text(s). Nesting deeper than maxValueDepth is an error.
func fromText(s string) (any, error) {
	x, ok := parseJSON(s)
	if !ok {
		return text(s), nil
	}
	if inner, isStr := x.(string); isStr {
		if y, ok := parseJSON(inner); ok {
			switch y.(type) {
			case map[string]any, []any:
				x = y
			}
		}
	}
	if depth(x, 0) > maxValueDepth {
		return nil, fmt.Errorf("is nested deeper than %d levels", maxValueDepth)
	}
	return x, nil
}

func parseJSON(s string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil || dec.More() {
		return nil, false
	}
	return x, true
}

// names joins what name says of each of xs.
func names[T any](xs []T, name func(T) string) string {
	var out []string
	for _, x := range xs {
		out = append(out, name(x))
	}
	return strings.Join(out, ", ")
}

// fromValue is an AnyValue as a JSON value: bytes as their base64 (as
// OTLP/JSON writes them), whole doubles as integers, the rest as pdata's
// AsRaw. Its nesting is bounded by the request's (MaxAnyValueDepth).
func fromValue(v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		out := make(map[string]any, v.Map().Len())
		for k, e := range v.Map().All() {
			out[k] = fromValue(e)
		}
		return out
	case pcommon.ValueTypeSlice:
		out := make([]any, v.Slice().Len())
		for i, e := range v.Slice().All() {
			out[i] = fromValue(e)
		}
		return out
	case pcommon.ValueTypeBytes:
		return base64.StdEncoding.EncodeToString(v.Bytes().AsRaw())
	case pcommon.ValueTypeDouble:
		// A whole double is the integer JSON text would give: 2500.0
		// compares equal to 2500 as money.
		if f := v.Double(); f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f)
		}
	}
	return v.AsRaw()
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

func str(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// Record reads tool call c through service.ToolCalls: the actions it
// records, none when no contract binds its tool (bound false). An error
// means the span is rejected; the matches of the other bindings are still
// returned. A span that cannot be read is still noted, so that its start
// counts for the work of the next action.
func Record(c ToolCall, r *service.ToolCalls, b *contracts.Bindings) (recs []service.Recording, bound bool, err error) {
	call := service.ToolCall{Source: "otlp", Scope: c.TraceID, CallID: c.SpanID, Name: fmt.Sprintf("span %s (%s)", c.SpanID, c.Dialect),
		Tool: c.Tool, Args: c.Args, Result: c.Result,
		Failed: c.Claim.Status == commitlayer.ClaimFailure, Message: commitlayer.Clip(c.Claim.Message, maxClaimMessage),
		Agent: c.Agent, Start: c.Start,
		NoArgs: fmt.Sprintf("the span has no %s: most instrumentations record it only when content capture is opted in", cmp.Or(c.ArgsKey, "arguments")),
		Trace:  map[string]string{"source": "otlp", "trace_id": c.TraceID, "span_id": c.SpanID, "tool": c.Tool, "tool_call_id": c.CallID}}
	switch {
	case c.Err != "":
		// Rejected where the tenant binds any tool at all.
		r.Record(call, nil)
		return nil, len(b.Tools()) > 0, errors.New(c.Err)
	case c.ArgsError != "" && b.Bound(c.Tool):
		r.Record(call, nil)
		return nil, true, fmt.Errorf("%s of tool %s: %s %s", call.Name, commitlayer.Clip(c.Tool, 64), c.ArgsKey, c.ArgsError)
	}
	return r.Record(call, b)
}

// maxClaimMessage bounds the claim message taken from a span's status.
const maxClaimMessage = 2048
