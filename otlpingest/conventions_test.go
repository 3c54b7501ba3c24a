package otlpingest_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/commitlayer/commitlayer/otlpingest"
)

// oneSpan is a request of one span, named name, with attrs.
func oneSpan(t *testing.T, name string, attrs func(pcommon.Map)) ptrace.Traces {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	span(rs.ScopeSpans().AppendEmpty(), 1, 0, name, nil)
	attrs(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes())
	return td
}

// TestToolCallsAsInstrumentationsEmitThem: a tool call is named by
// gen_ai.operation.name, else by the span name alone ("execute_tool
// {tool}"), else by an MCP tools/call span; another operation never is.
func TestToolCallsAsInstrumentationsEmitThem(t *testing.T) {
	for _, tc := range []struct {
		name  string
		span  string
		attrs map[string]any
		tool  string // "" is no tool call
	}{
		{"operation and tool attributes", "anything", map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"}, "refund"},
		{"span name only", "execute_tool refund", nil, "refund"},
		{"span name and tool attribute", "execute_tool", map[string]any{"gen_ai.tool.name": "refund"}, "refund"},
		{"operation, tool only in the name", "execute_tool refund", map[string]any{"gen_ai.operation.name": "execute_tool"}, "refund"},
		{"MCP client span without operation", "tools/call refund", map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": "refund"}, "refund"},
		{"MCP span, tool only in the name", "tools/call refund", map[string]any{"mcp.method.name": "tools/call"}, "refund"},
		{"MCP span with operation, tool in the name", "tools/call refund", map[string]any{"gen_ai.operation.name": "execute_tool"}, "refund"},
		{"another operation named like a tool call", "execute_tool refund", map[string]any{"gen_ai.operation.name": "chat"}, ""},
		{"another MCP method", "tools/list", map[string]any{"mcp.method.name": "tools/list"}, ""},
		{"a prefix that is not the operation", "execute_toolbox refund", nil, ""},
		{"a chat span", "chat gpt-5", map[string]any{"gen_ai.operation.name": "chat"}, ""},
		{"MCP server span", "tools/call refund", map[string]any{"gen_ai.operation.name": "execute_tool", "mcp.method.name": "tools/call", "gen_ai.tool.name": "refund"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := oneSpan(t, tc.span, func(m pcommon.Map) { require.NoError(t, m.FromRaw(tc.attrs)) })
			if strings.HasPrefix(tc.name, "MCP server") {
				td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetKind(ptrace.SpanKindServer)
			}
			calls, others := otlpingest.ToolCalls(td, nil)
			if tc.tool == "" {
				require.Empty(t, calls)
				require.Equal(t, 1, others)
				return
			}
			require.Len(t, calls, 1)
			require.Equal(t, tc.tool, calls[0].Tool)
		})
	}
}

// TestToolArgumentsInEveryForm: gen_ai.tool.call.arguments and .result
// are "any": a structured AnyValue, or JSON in a string (the conventions'
// fallback), read alike; what cannot be an object is named.
func TestToolArgumentsInEveryForm(t *testing.T) {
	want := map[string]any{"order_id": "o_1", "amount": int64(2500), "lines": []any{"a", int64(2)}, "gift": false}
	for _, tc := range []struct {
		name    string
		set     func(pcommon.Value)
		args    map[string]any
		problem string
	}{
		{"JSON string", func(v pcommon.Value) { v.SetStr(`{"order_id":"o_1","amount":2500,"lines":["a",2],"gift":false}`) }, want, ""},
		{"structured kvlist", func(v pcommon.Value) {
			require.NoError(t, v.SetEmptyMap().FromRaw(map[string]any{"order_id": "o_1", "amount": 2500, "lines": []any{"a", 2}, "gift": false}))
		}, want, ""},
		{"double as whole number", func(v pcommon.Value) {
			require.NoError(t, v.SetEmptyMap().FromRaw(map[string]any{"order_id": "o_1", "amount": 2500.0, "lines": []any{"a", 2.0}, "gift": false}))
		}, want, ""},
		{"JSON encoded twice", func(v pcommon.Value) {
			b, _ := json.Marshal(`{"order_id":"o_1","amount":2500,"lines":["a",2],"gift":false}`)
			v.SetStr(string(b))
		}, want, ""},
		{"bytes holding JSON", func(v pcommon.Value) {
			v.SetEmptyBytes().FromRaw([]byte(`{"order_id":"o_1","amount":2500,"lines":["a",2],"gift":false}`))
		}, want, ""},
		{"bytes inside a kvlist", func(v pcommon.Value) {
			v.SetEmptyMap().PutEmptyBytes("blob").FromRaw([]byte("hi"))
		}, map[string]any{"blob": "aGk="}, ""},
		{"empty object", func(v pcommon.Value) { v.SetStr("{}") }, map[string]any{}, ""},
		{"not JSON", func(v pcommon.Value) { v.SetStr("order_id=o_1") }, nil, "is not JSON"},
		{"empty string", func(v pcommon.Value) { v.SetStr("") }, nil, "is empty"},
		{"JSON array", func(v pcommon.Value) { v.SetStr(`["o_1"]`) }, nil, "is an array, not an object"},
		{"structured array", func(v pcommon.Value) { v.SetEmptySlice().AppendEmpty().SetStr("o_1") }, nil, "is an array, not an object"},
		{"a number", func(v pcommon.Value) { v.SetInt(5) }, nil, "holds JSON that is not an object"},
		{"two JSON values", func(v pcommon.Value) { v.SetStr(`{} {}`) }, nil, "is not JSON"},
		{"not UTF-8", func(v pcommon.Value) { v.SetStr("{\"a\":\"\xff\"}") }, nil, "is not UTF-8 text"},
		{"NaN", func(v pcommon.Value) { v.SetEmptyMap().PutDouble("amount", nan()) }, nil, "amount: number NaN cannot be kept exactly"},
		{"deep JSON", func(v pcommon.Value) { v.SetStr(strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100)) }, nil, "is nested deeper than 64 levels"},
		// (A structured value is bounded by the request: MaxAnyValueDepth.)
		{"deep JSON text", func(v pcommon.Value) { v.SetStr(strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100)) },
			nil, "is nested deeper than 64 levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := oneSpan(t, "execute_tool refund", func(m pcommon.Map) { tc.set(m.PutEmpty("gen_ai.tool.call.arguments")) })
			calls, _ := otlpingest.ToolCalls(td, nil)
			require.Len(t, calls, 1)
			if tc.problem == "" {
				require.Empty(t, calls[0].ArgsError)
			} else {
				require.Contains(t, calls[0].ArgsError, tc.problem)
			}
			require.Equal(t, tc.args, calls[0].Args)
		})
	}

	// Results: an object in any form is read as one; anything else is
	// {"text": …}, as on the MCP gateway.
	for _, tc := range []struct {
		name   string
		set    func(pcommon.Value)
		result map[string]any
	}{
		{"structured", func(v pcommon.Value) { v.SetEmptyMap().PutStr("refund_id", "re_1") }, map[string]any{"refund_id": "re_1"}},
		{"JSON string", func(v pcommon.Value) { v.SetStr(`{"refund_id":"re_1"}`) }, map[string]any{"refund_id": "re_1"}},
		{"text", func(v pcommon.Value) { v.SetStr("refunded") }, map[string]any{"text": "refunded"}},
		{"array", func(v pcommon.Value) { v.SetEmptySlice().AppendEmpty().SetInt(1) }, map[string]any{"text": "[1]"}},
	} {
		t.Run("result "+tc.name, func(t *testing.T) {
			td := oneSpan(t, "execute_tool refund", func(m pcommon.Map) { tc.set(m.PutEmpty("gen_ai.tool.call.result")) })
			calls, _ := otlpingest.ToolCalls(td, nil)
			require.Len(t, calls, 1)
			require.Equal(t, tc.result, calls[0].Result)
		})
	}
}

// TestUnmarshalOTLPJSONDialects: what OTLP/JSON senders write (lowerCamelCase
// or snake_case keys, enums as numbers or names, 64-bit integers as
// strings or numbers, hex ids in either case, unknown fields) is one
// request; base64 ids are refused with the reason.
func TestUnmarshalOTLPJSONDialects(t *testing.T) {
	camel := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
	  "scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"a1a2a3a4a5a6a7a8",
	  "name":"execute_tool refund","kind":1,"startTimeUnixNano":"1764579600000000000","status":{"code":2,"message":"boom"},
	  "attributes":[{"key":"gen_ai.tool.call.arguments","value":{"kvlistValue":{"values":[{"key":"amount","value":{"intValue":"25"}}]}}}]}]}]}]}`
	snake := `{"resource_spans":[{"resource":{"attributes":[{"key":"service.name","value":{"string_value":"svc"}}]},"future_field":{"x":[1]},
	  "scope_spans":[{"scope":{"name":"s"},"spans":[{"trace_id":"0102030405060708090A0B0C0D0E0F10","span_id":"A1A2A3A4A5A6A7A8","flags":256,
	  "name":"execute_tool refund","kind":"SPAN_KIND_INTERNAL","start_time_unix_nano":1764579600000000000,"status":{"code":"STATUS_CODE_ERROR","message":"boom"},
	  "attributes":[{"key":"gen_ai.tool.call.arguments","value":{"kvlist_value":{"values":[{"key":"amount","value":{"int_value":25}}]}}}]}]}]}]}`
	var got []otlpingest.ToolCall
	for _, body := range []string{camel, snake} {
		td, err := unmarshal(otlpingest.JSON, []byte(body))
		require.NoError(t, err)
		calls, _ := otlpingest.ToolCalls(td, nil)
		require.Len(t, calls, 1)
		got = append(got, calls[0])
	}
	require.Equal(t, got[0], got[1])
	require.Equal(t, "0102030405060708090a0b0c0d0e0f10", got[0].TraceID)
	require.Equal(t, "a1a2a3a4a5a6a7a8", got[0].SpanID)
	require.Equal(t, map[string]any{"amount": int64(25)}, got[0].Args)
	require.Equal(t, "failure", string(got[0].Claim.Status))
	require.Equal(t, "svc", got[0].Agent)
	require.Equal(t, int64(1764579600), got[0].Start.Unix())

	b64 := strings.Replace(camel, "0102030405060708090a0b0c0d0e0f10", "AQIDBAUGBwgJCgsMDQ4PEA==", 1)
	_, err := unmarshal(otlpingest.JSON, []byte(b64))
	require.ErrorIs(t, err, otlpingest.ErrMalformed)
	require.Contains(t, err.Error(), "hex strings")
	_, err = unmarshal(otlpingest.Protobuf, []byte(camel))
	require.ErrorIs(t, err, otlpingest.ErrMalformed)
}

// unmarshal reads a body already decompressed.
func unmarshal(enc otlpingest.Encoding, body []byte) (ptrace.Traces, error) {
	return otlpingest.Read(bytes.NewReader(body), enc, "", 64<<20)
}

func TestReadEncodings(t *testing.T) {
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(b)
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	read := func(body []byte, ce string, limit int64) error {
		_, err := otlpingest.Read(bytes.NewReader(body), otlpingest.JSON, ce, limit)
		return err
	}
	for _, enc := range []string{"gzip", "GZIP", "x-gzip", "gzip, identity", "identity,gzip"} {
		require.NoError(t, read(gz([]byte("{}")), enc, 100), enc)
	}
	for _, enc := range []string{"", "identity", "Identity"} {
		require.NoError(t, read([]byte("{}"), enc, 100), enc)
	}
	for _, enc := range []string{"br", "deflate", "zstd", "snappy", "gzip, gzip", "compress"} {
		err := read([]byte("{}"), enc, 100)
		require.ErrorIs(t, err, otlpingest.ErrUnsupported, enc)
		require.Contains(t, err.Error(), "Content-Encoding", enc)
	}
	// A stream cut short, and a bomb: 100 bytes that inflate past the limit.
	whole := gz([]byte("{" + strings.Repeat(" ", 1000) + "}"))
	require.ErrorIs(t, read(whole[:len(whole)-6], "gzip", 10_000), otlpingest.ErrMalformed)
	err := read(whole, "gzip", 100)
	require.ErrorIs(t, err, otlpingest.ErrTooLarge)
	require.Contains(t, err.Error(), "decompressed")
	require.ErrorIs(t, read([]byte("{ }  "), "", 4), otlpingest.ErrTooLarge)
	require.NoError(t, read([]byte("{  }"), "identity", 4))

	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"} {
		enc, err := otlpingest.EncodingOf(ct)
		require.NoError(t, err, ct)
		require.Equal(t, otlpingest.JSON, enc, ct)
	}
	for _, ct := range []string{"application/x-protobuf", "application/protobuf", "application/x-protobuf; charset=binary"} {
		enc, err := otlpingest.EncodingOf(ct)
		require.NoError(t, err, ct)
		require.Equal(t, otlpingest.Protobuf, enc, ct)
	}
	for _, ct := range []string{"", "text/plain", "application/grpc", "application/jsonl"} {
		_, err := otlpingest.EncodingOf(ct)
		require.ErrorIs(t, err, otlpingest.ErrUnsupported, ct)
	}
}

// TestResponseAndStatusEncodings: a request accepted in full leaves
// partial_success unset; a message that is not UTF-8 still encodes.
func TestResponseAndStatusEncodings(t *testing.T) {
	b, err := otlpingest.Response(otlpingest.JSON, 0, "")
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(b))
	b, err = otlpingest.Response(otlpingest.Protobuf, 0, "")
	require.NoError(t, err)
	require.Empty(t, b)

	for _, enc := range []otlpingest.Encoding{otlpingest.JSON, otlpingest.Protobuf} {
		b, err := otlpingest.Response(enc, 2, "span 01: tool \xff")
		require.NoError(t, err)
		resp := ptraceotlp.NewExportResponse()
		if enc == otlpingest.JSON {
			require.NoError(t, resp.UnmarshalJSON(b))
		} else {
			require.NoError(t, resp.UnmarshalProto(b))
		}
		require.Equal(t, int64(2), resp.PartialSuccess().RejectedSpans())
		require.Equal(t, "span 01: tool \uFFFD", resp.PartialSuccess().ErrorMessage())

		st := &rpcstatus.Status{}
		b = otlpingest.Status(enc, 400, "bad \xff")
		if enc == otlpingest.JSON {
			require.NoError(t, protojson.Unmarshal(b, st))
		} else {
			require.NoError(t, proto.Unmarshal(b, st))
		}
		require.Equal(t, "bad \uFFFD", st.Message)
		require.Equal(t, int32(3), st.Code) // INVALID_ARGUMENT
		require.Len(t, st.Details, 1)
		br := &errdetails.BadRequest{}
		require.NoError(t, st.Details[0].UnmarshalTo(br), "a 400 says what was wrong in a BadRequest")
		require.Equal(t, "bad \uFFFD", br.FieldViolations[0].Description)

		b = otlpingest.Status(enc, 503, "away")
		st = &rpcstatus.Status{}
		if enc == otlpingest.JSON {
			require.NoError(t, protojson.Unmarshal(b, st))
		} else {
			require.NoError(t, proto.Unmarshal(b, st))
		}
		require.Equal(t, int32(14), st.Code) // UNAVAILABLE
		ri := &errdetails.RetryInfo{}
		require.NoError(t, st.Details[0].UnmarshalTo(ri))
		require.Equal(t, time.Second, ri.RetryDelay.AsDuration())
	}
}

func nan() float64 { return math.NaN() }

// TestDeeplyNestedArguments: hostile nesting is a refusal, never a crash,
// the same on both encodings: a malformed request, refused by the JSON
// reader before anything is decoded.
func TestDeeplyNestedArguments(t *testing.T) {
	const levels = 20_000
	// Protobuf, sizes inside out, then written outside in: AnyValue{
	// kvlist_value{values{key "k", value AnyValue{…}}}}.
	leaf := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "x")
	sizes := []int{len(leaf)}
	kvSize := func(in int) int { return 3 + 1 + protowire.SizeVarint(uint64(in)) + in }
	listSize := func(in int) int { return 1 + protowire.SizeVarint(uint64(kvSize(in))) + kvSize(in) }
	for range levels {
		in := sizes[len(sizes)-1]
		sizes = append(sizes, 1+protowire.SizeVarint(uint64(listSize(in)))+listSize(in))
	}
	var v []byte
	for i := levels - 1; i >= 0; i-- {
		in := sizes[i]
		v = protowire.AppendVarint(protowire.AppendTag(v, 6, protowire.BytesType), uint64(listSize(in)))
		v = protowire.AppendVarint(protowire.AppendTag(v, 1, protowire.BytesType), uint64(kvSize(in)))
		v = protowire.AppendString(protowire.AppendTag(v, 1, protowire.BytesType), "k")
		v = protowire.AppendVarint(protowire.AppendTag(v, 2, protowire.BytesType), uint64(in))
	}
	v = append(v, leaf...)
	kv := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "gen_ai.tool.call.arguments")
	kv = protowire.AppendBytes(protowire.AppendTag(kv, 2, protowire.BytesType), v)
	sp := protowire.AppendString(protowire.AppendTag(nil, 5, protowire.BytesType), "execute_tool refund")
	sp = protowire.AppendBytes(protowire.AppendTag(sp, 9, protowire.BytesType), kv)
	ss := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), sp)
	rs := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), ss)
	_, err := unmarshal(otlpingest.Protobuf, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs))
	require.ErrorIs(t, err, otlpingest.ErrMalformed)

	deep := strings.Repeat(`{"kvlistValue":{"values":[{"key":"k","value":`, levels) + `{"stringValue":"x"}` + strings.Repeat(`}]}}`, levels)
	_, err = otlpingest.Read(strings.NewReader(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"execute_tool refund",
	  "attributes":[{"key":"gen_ai.tool.call.arguments","value":`+deep+`}]}]}]}]}`), otlpingest.JSON, "", 64<<20)
	require.ErrorIs(t, err, otlpingest.ErrMalformed)
	require.ErrorContains(t, err, "nested in more than 32 arrays and kvlists")

	// Arguments nested deeper than 64 levels inside a string are the
	// span's problem, named.
	td := oneSpan(t, "execute_tool refund", func(m pcommon.Map) {
		m.PutStr("gen_ai.tool.call.arguments", strings.Repeat(`{"a":`, 70)+"1"+strings.Repeat("}", 70))
	})
	calls, _ := otlpingest.ToolCalls(td, nil)
	require.Len(t, calls, 1)
	require.Contains(t, calls[0].ArgsError, "nested deeper than 64 levels")
}
