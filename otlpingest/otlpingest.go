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
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

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

	OpExecuteTool = "execute_tool"
	OpInvokeAgent = "invoke_agent"
)

// Encoding is an OTLP/HTTP body encoding.
type Encoding int

const (
	Protobuf Encoding = iota
	JSON
)

// ContentType is the media type of the encoding.
func (e Encoding) ContentType() string {
	if e == JSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

// Errors of a request, for the HTTP edge to map: ErrUnsupported (415),
// ErrTooLarge (413), ErrMalformed (400).
var (
	ErrUnsupported = errors.New("unsupported media type")
	ErrTooLarge    = errors.New("request body too large")
	ErrMalformed   = errors.New("malformed request")
)

// EncodingOf reads the request's Content-Type: application/x-protobuf or
// application/json (parameters ignored). Anything else wraps
// ErrUnsupported.
func EncodingOf(contentType string) (Encoding, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return Protobuf, nil
	case "application/json":
		return JSON, nil
	}
	return Protobuf, fmt.Errorf("%w: Content-Type %q (OTLP/HTTP is application/x-protobuf or application/json)", ErrUnsupported, commitlayer.Clip(contentType, 64))
}

// ReadBody reads a request body of at most limit bytes, before and after
// decompression: Content-Encoding gzip is inflated, identity (or none) read
// as is, anything else wraps ErrUnsupported. A body over the limit wraps
// ErrTooLarge, a broken gzip stream ErrMalformed.
func ReadBody(r io.Reader, contentEncoding string, limit int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	switch enc := strings.ToLower(strings.TrimSpace(contentEncoding)); enc {
	case "", "identity":
		return raw, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, limit+1))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		if int64(len(out)) > limit {
			return nil, fmt.Errorf("%w: more than %d bytes once decompressed", ErrTooLarge, limit)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: Content-Encoding %q (gzip or identity)", ErrUnsupported, commitlayer.Clip(contentEncoding, 32))
	}
}

// Unmarshal decodes an ExportTraceServiceRequest. A body that is not one
// wraps ErrMalformed.
func Unmarshal(enc Encoding, body []byte) (ptrace.Traces, error) {
	req := ptraceotlp.NewExportRequest()
	var err error
	if enc == JSON {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: not an OTLP ExportTraceServiceRequest in %s: %v", ErrMalformed, enc.ContentType(), err)
	}
	return req.Traces(), nil
}

// Response encodes an ExportTraceServiceResponse: partial_success set when
// spans were rejected (left unset when all were accepted, as OTLP asks).
func Response(enc Encoding, rejected int64, message string) ([]byte, error) {
	resp := ptraceotlp.NewExportResponse()
	if rejected > 0 || message != "" {
		resp.PartialSuccess().SetRejectedSpans(rejected)
		resp.PartialSuccess().SetErrorMessage(message)
	}
	var b []byte
	var err error
	if enc == JSON {
		b, err = resp.MarshalJSON()
	} else {
		b, err = resp.MarshalProto()
	}
	if err != nil {
		return nil, fmt.Errorf("encode export response: %w", err)
	}
	return b, nil
}

// Status encodes a google.rpc.Status, OTLP/HTTP's error body, with the
// gRPC code that fits the HTTP status.
func Status(enc Encoding, httpStatus int, message string) []byte {
	st := &rpcstatus.Status{Code: int32(grpcCode(httpStatus)), Message: message}
	var b []byte
	var err error
	if enc == JSON {
		b, err = protojson.Marshal(st)
	} else {
		b, err = proto.Marshal(st)
	}
	if err != nil { // a message that is not UTF-8; cannot happen with ours
		return nil
	}
	return b
}

func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}

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
// its name is "execute_tool {tool}"), unless it lies inside an
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
	name := sp.Name()
	tool := str(attrs, AttrToolName)
	switch {
	case op == OpExecuteTool:
	case op == "" && strings.HasPrefix(name, OpExecuteTool+" "):
	default:
		return ToolCall{}, false
	}
	if tool == "" {
		tool = strings.TrimSpace(strings.TrimPrefix(name, OpExecuteTool))
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
		if err != nil {
			c.ArgsError = err.Error()
		} else if m == nil {
			c.ArgsError = "is not a JSON object"
		}
		c.Args = m
	}
	if v, ok := attrs.Get(AttrToolResult); ok {
		if m, err := object(v); err == nil && m != nil {
			c.Result = m
		} else {
			c.Result = map[string]any{"text": v.AsString()}
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

// object reads an attribute as a JSON object: a string holding one, or a
// map attribute. A string that is not JSON is an error; valid JSON that is
// not an object gives nil.
func object(v pcommon.Value) (map[string]any, error) {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		n, err := commitlayer.NormalizeValue(v.Map().AsRaw())
		if err != nil {
			return nil, err
		}
		return n.(map[string]any), nil
	case pcommon.ValueTypeStr:
		dec := json.NewDecoder(strings.NewReader(v.Str()))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return nil, errors.New("is not JSON")
		}
		if dec.More() {
			return nil, errors.New("holds more than one JSON value")
		}
		m, ok := x.(map[string]any)
		if !ok {
			return nil, nil
		}
		n, err := commitlayer.NormalizeValue(m)
		if err != nil {
			return nil, err
		}
		return n.(map[string]any), nil
	}
	return nil, nil
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
	if merr != nil {
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
	return nil
}
