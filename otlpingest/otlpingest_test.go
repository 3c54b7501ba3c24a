package otlpingest_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/otlpingest"
	"github.com/commitlayer/commitlayer/service"
)

func span(ss ptrace.ScopeSpans, id, parent byte, name string, attrs map[string]any) ptrace.Span {
	sp := ss.Spans().AppendEmpty()
	sp.SetName(name)
	sp.SetTraceID(pcommon.TraceID(bytes.Repeat([]byte{7}, 16)))
	sp.SetSpanID(pcommon.SpanID(bytes.Repeat([]byte{id}, 8)))
	if parent != 0 {
		sp.SetParentSpanID(pcommon.SpanID(bytes.Repeat([]byte{parent}, 8)))
	}
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)))
	_ = sp.Attributes().FromRaw(attrs)
	return sp
}

func TestToolCalls(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	ss := rs.ScopeSpans().AppendEmpty()
	span(ss, 1, 0, "invoke_agent planner", map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"})
	span(ss, 2, 1, "mcp tools/call", map[string]any{"mcp.session.id": "s"})
	// A grandchild of invoke_agent through an MCP client span; map arguments.
	span(ss, 3, 2, "execute_tool refund", map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
		"gen_ai.tool.call.arguments": map[string]any{"order_id": "o_1", "amount": 25},
		"gen_ai.tool.call.result":    "refunded"})
	// Named only by its span name; error.type is a failure; own agent name.
	span(ss, 4, 0, "execute_tool get_order", map[string]any{"error.type": "timeout", "gen_ai.agent.name": "reader",
		"gen_ai.tool.call.result": `{"status": 200}`})
	// Not a tool call.
	span(ss, 5, 1, "chat", map[string]any{"gen_ai.operation.name": "chat"})
	// Orphan tool span: the agent is the service.
	span(ss, 6, 9, "execute_tool x", map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": "[1]"})
	// The refund call's own MCP client span inside it: the same call,
	// not counted twice.
	span(ss, 7, 3, "tools/call refund", map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
		"mcp.method.name": "tools/call", "gen_ai.tool.call.arguments": `{"order_id":"o_1","amount":25}`})

	calls, others := otlpingest.ToolCalls(td, nil)
	require.Equal(t, 4, others)
	require.Len(t, calls, 3)
	require.Equal(t, "refund", calls[0].Tool)
	require.Equal(t, "planner", calls[0].Agent)
	require.Equal(t, map[string]any{"order_id": "o_1", "amount": int64(25)}, calls[0].Args)
	require.Equal(t, map[string]any{"text": "refunded"}, calls[0].Result)
	require.Equal(t, commitlayer.ClaimSuccess, calls[0].Claim.Status)
	require.Equal(t, "0303030303030303", calls[0].SpanID)
	require.Equal(t, strings.Repeat("07", 16), calls[0].TraceID)

	require.Equal(t, "get_order", calls[1].Tool)
	require.Equal(t, "reader", calls[1].Agent)
	require.Equal(t, commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "timeout"}, calls[1].Claim)
	require.Equal(t, map[string]any{"status": int64(200)}, calls[1].Result)

	require.Equal(t, "svc", calls[2].Agent)
	require.Equal(t, "is an array, not an object", calls[2].ArgsError)
}

func TestRecord(t *testing.T) {
	c, err := contracts.Parse([]byte(`id: refund_customer
subject: order
settlement: 10m
sources: [payments]
bindings:
  - tool: refund
    subject: "'order:' + args.order_id"
    params: {amount: args.amount}
`))
	require.NoError(t, err)
	b := contracts.NewBindings([]*contracts.Contract{c})
	call := otlpingest.ToolCall{TraceID: strings.Repeat("ab", 16), SpanID: strings.Repeat("cd", 8), Tool: "refund",
		Dialect: "genai", ArgsKey: "gen_ai.tool.call.arguments", Args: map[string]any{"order_id": "o_1", "amount": 5}, Start: time.Unix(1_800_000_000, 0).UTC(), Agent: "a",
		Claim: commitlayer.Claim{Status: "success"}}
	recs, bound, err := otlpingest.Record(call, service.NewToolCalls(0, 0), b)
	require.NoError(t, err)
	require.True(t, bound)
	require.Len(t, recs, 1)
	require.NotEmpty(t, recs[0].ChainKey)
	require.Equal(t, commitlayer.Subject("order:o_1"), recs[0].Action.Subject)
	again, _, _ := otlpingest.Record(call, service.NewToolCalls(0, 0), b)
	require.Equal(t, recs[0].ChainKey, again[0].ChainKey, "the same span is the same action")
	require.Equal(t, recs[0].Hash, again[0].Hash, "the same span hashes the same")

	_, bound, err = otlpingest.Record(otlpingest.ToolCall{Tool: "get_order"}, service.NewToolCalls(0, 0), b)
	require.False(t, bound)
	require.NoError(t, err)

	for name, mut := range map[string]func(*otlpingest.ToolCall){
		"no span id":    func(c *otlpingest.ToolCall) { c.SpanID = "" },
		"no start":      func(c *otlpingest.ToolCall) { c.Start = time.Time{} },
		"no agent":      func(c *otlpingest.ToolCall) { c.Agent = "" },
		"bad arguments": func(c *otlpingest.ToolCall) { c.ArgsError = "is not JSON" },
		"missing arg":   func(c *otlpingest.ToolCall) { c.Args = map[string]any{} },
		"no arguments":  func(c *otlpingest.ToolCall) { c.Args = nil },
	} {
		bad := call
		mut(&bad)
		recs, bound, err := otlpingest.Record(bad, service.NewToolCalls(0, 0), b)
		require.True(t, bound, name)
		require.Error(t, err, name)
		require.Empty(t, recs, name)
		if name == "no arguments" {
			require.ErrorContains(t, err, "the span has no gen_ai.tool.call.arguments")
		}
	}
}

func TestReadAndEncoding(t *testing.T) {
	_, err := otlpingest.EncodingOf("application/json; charset=utf-8")
	require.NoError(t, err)
	enc, err := otlpingest.EncodingOf("application/x-protobuf")
	require.NoError(t, err)
	require.Equal(t, otlpingest.Protobuf, enc)
	_, err = otlpingest.EncodingOf("")
	require.True(t, errors.Is(err, otlpingest.ErrUnsupported))
	_, err = otlpingest.Read(strings.NewReader("[]"), otlpingest.JSON, "", 10)
	require.ErrorIs(t, err, otlpingest.ErrMalformed)
}
