package otlpingest_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/otlpingest"
	"github.com/commitlayer/commitlayer/service"
)

// read is what ToolCalls read of a call, for comparing.
type read struct {
	dialect, tool, callID, agent string
	args, result                 map[string]any
	failed                       bool
	argsError, err               string
}

func readOf(c otlpingest.ToolCall) read {
	return read{c.Dialect, c.Tool, c.CallID, c.Agent, c.Args, c.Result, c.Claim.Status == commitlayer.ClaimFailure, c.ArgsError, c.Err}
}

func boundTools(tools ...string) func(string) bool {
	return func(s string) bool {
		for _, t := range tools {
			if s == t {
				return true
			}
		}
		return false
	}
}

// TestDialectsOnRecordedSpans reads the spans the real instrumentations
// exported (captured from their exporters, under testdata/: the AI SDK 7
// with each of its OpenTelemetry integrations, OpenInference for
// LangChain.js (createAgent and a bindTools loop) and for the OpenAI
// Agents SDK, OpenLLMetry's node SDK; pydantic-ai's older format written
// from its source): each tool call read through its dialect, its
// arguments, result, call id, agent and failure; the rest left alone.
func TestDialectsOnRecordedSpans(t *testing.T) {
	grant := map[string]any{"order_id": "ord_1", "amount": int64(500)}
	credit := map[string]any{"credit_id": "cr_ord_1", "amount": int64(500)}
	for _, tc := range []struct {
		file   string
		others int
		want   []read
	}{
		{"ai-sdk-legacy.json", 3, []read{
			{"ai-sdk", "fail_tool", "call_2", "support-agent", map[string]any{"order_id": "ord_2"}, nil, true, "", ""},
			{"ai-sdk", "grant_store_credit", "call_1", "support-agent", grant, credit, false, "", ""},
			// A string result is JSON-encoded by the SDK: read as the string.
			{"ai-sdk", "add_note", "call_3", "support-agent", map[string]any{"text": "hi"}, map[string]any{"text": "noted"}, false, "", ""},
		}},
		{"ai-sdk-genai.json", 5, []read{
			{"genai", "fail_tool", "call_2", "support-agent", map[string]any{"order_id": "ord_2"}, nil, true, "", ""},
			{"genai", "grant_store_credit", "call_1", "support-agent", grant, credit, false, "", ""},
			{"genai", "add_note", "call_3", "support-agent", map[string]any{"text": "hi"}, map[string]any{"text": "noted"}, false, "", ""},
		}},
		// The agent is the createAgent's name (metadata.lc_agent_name); the
		// result is the serialized ToolMessage's content, its call id the
		// ToolMessage's. A tool's only string argument is written without
		// its name (text/plain): unreadable, said so.
		{"openinference-langchain-agent.json", 10, []read{
			{"openinference", "grant_store_credit", "call_1", "support-agent", grant, credit, false, "", ""},
			{"openinference", "fail_tool", "", "support-agent", nil, nil, true,
				"is text/plain (input.mime_type), not the arguments as a JSON object", ""},
		}},
		// A bindTools loop names no agent: the resource's service.name.
		{"openinference-langchain-bindtools.json", 2, []read{
			{"openinference", "grant_store_credit", "call_1", "shop-agent", grant, credit, false, "", ""},
			{"openinference", "fail_tool", "", "shop-agent", nil, nil, true,
				"is text/plain (input.mime_type), not the arguments as a JSON object", ""},
		}},
		// The agent is the nearest AGENT span's graph.node.id; the handoff
		// (a TOOL span handoff_to_billing) is no call.
		{"openinference-openai-agents.json", 7, []read{
			{"openinference", "grant_store_credit", "", "support-agent", grant, credit, false, "", ""},
			{"openinference", "fail_tool", "", "support-agent", map[string]any{"order_id": "ord_2", "amount": int64(1)},
				map[string]any{"text": "An error occurred while running the tool. Please try again."}, true, "", ""},
		}},
		// A failing tool's span is never ended by the SDK, so never exported.
		// Positional arguments have no names.
		{"openllmetry.json", 2, []read{
			{"openllmetry", "grant_store_credit", "", "support-agent", grant, credit, false, "", ""},
			{"openllmetry", "two_args", "", "support-agent", nil, map[string]any{"text": "ok"}, false, "args.0 is a string, not an object", ""},
		}},
		{"pydantic-ai-v2.json", 4, []read{
			{"pydantic-ai", "grant_store_credit", "call_1", "support-agent", grant, credit, false, "", ""},
			{"pydantic-ai", "fail_tool", "call_2", "support-agent", map[string]any{"order_id": "ord_2", "amount": int64(1)},
				map[string]any{"text": "Unknown order ord_2\n\nFix the errors and try again."}, true, "", ""},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile("testdata/" + tc.file)
			require.NoError(t, err)
			td, err := otlpingest.Read(bytes.NewReader(body), otlpingest.JSON, "", 8<<20)
			require.NoError(t, err)
			calls, others := otlpingest.ToolCalls(td, boundTools("grant_store_credit", "fail_tool"))
			var got []read
			for _, c := range calls {
				require.Len(t, c.TraceID, 32)
				require.Len(t, c.SpanID, 16)
				require.False(t, c.Start.IsZero())
				got = append(got, readOf(c))
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.others, others)
		})
	}
}

// TestDialectsRejectWhatTheyCannotRead: a span that looks like a call but
// cannot be read is rejected with a message naming the dialect and the key
// (when the tenant binds any tool); a span of no dialect named like a bound
// tool too; unbound tools and other spans are left alone without a word.
func TestDialectsRejectWhatTheyCannotRead(t *testing.T) {
	c, err := contracts.Parse([]byte(`id: store_credit
subject: order
settlement: 10m
sources: [ledger]
bindings:
  - tool: grant_store_credit
    subject: "'order:' + args.order_id"
    params: {amount: args.amount}
`))
	require.NoError(t, err)
	b := contracts.NewBindings([]*contracts.Contract{c})
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  string // "" : ignored
	}{
		{"grant_store_credit", map[string]any{"custom.args": "{}"}, `span 0202020202020202 is named "grant_store_credit", a bound tool, but is in no dialect CommitLayer reads`},
		{"grant_store_credit.tool", map[string]any{"traceloop.span.kind": "tool"}, "span 0202020202020202 (openllmetry): no tool name (traceloop.entity.name)"},
		{"ai.toolCall", map[string]any{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "grant_store_credit"},
			"(ai-sdk) of tool grant_store_credit: contract store_credit: bindings[0].subject (tool grant_store_credit): no such key: order_id (the span has no ai.toolCall.args: most instrumentations record it only when content capture is opted in)"},
		{"grant_store_credit", map[string]any{"openinference.span.kind": "TOOL", "tool.name": "grant_store_credit", "input.value": "ord_1", "input.mime_type": "text/plain"},
			"span 0202020202020202 (openinference) of tool grant_store_credit: input.value is text/plain (input.mime_type), not the arguments as a JSON object"},
		{"t", map[string]any{"traceloop.span.kind": "tool", "traceloop.entity.name": "grant_store_credit", "traceloop.entity.input": `{"args":["ord_1",5],"kwargs":{}}`},
			"(openllmetry) of tool grant_store_credit: traceloop.entity.input args.0 is a string, not an object"},
		// Older GenAI spellings are read.
		{"execute_tool grant_store_credit", map[string]any{"gen_ai.tool.input": `{"order_id":"o_1","amount":5}`, "gen_ai.tool.output": "done"}, ""},
		{"execute_tool grant_store_credit", map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grant_store_credit",
			"gcp.vertex.agent.tool_call_args": `{"order_id":"o_1","amount":5}`, "gcp.vertex.agent.tool_response": `{"ok":true}`}, ""},
		{"lookup", map[string]any{"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": "x", "input.mime_type": "text/plain"}, ""},
		{"handoff to billing", map[string]any{"openinference.span.kind": "TOOL", "tool.name": "handoff_to_billing"}, ""},
		{"chat gpt-5", map[string]any{"gen_ai.operation.name": "chat"}, ""},
	} {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc")
		span(rs.ScopeSpans().AppendEmpty(), 2, 0, tc.name, tc.attrs)
		calls, _ := otlpingest.ToolCalls(td, b.Bound)
		var msgs []string
		recorded := 0
		for _, call := range calls {
			recs, bound, err := otlpingest.Record(call, service.NewToolCalls(0, 0), b)
			recorded += len(recs)
			if err != nil {
				require.True(t, bound, tc.name)
				msgs = append(msgs, err.Error())
			}
		}
		if tc.want == "" {
			require.Empty(t, msgs, tc.name)
			require.Equal(t, strings.HasPrefix(tc.name, "execute_tool"), recorded == 1, "%s: recorded %d", tc.name, recorded)
			continue
		}
		require.Len(t, msgs, 1, tc.name)
		require.Contains(t, msgs[0], tc.want, tc.name)
		require.Zero(t, recorded, tc.name)

		// A tenant that binds nothing hears nothing.
		for _, call := range calls {
			_, bound, _ := otlpingest.Record(call, service.NewToolCalls(0, 0), contracts.NewBindings(nil))
			require.False(t, bound, tc.name)
		}
	}
}
