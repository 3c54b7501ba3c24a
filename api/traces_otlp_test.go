package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/commitlayer/commitlayer"
)

// These tests speak to POST /v1/traces over real HTTP, as exporters
// written elsewhere do: the OpenTelemetry Go SDK's otlptracehttp, and
// bodies written by hand in OTLP/JSON and protobuf (not through pdata,
// which the server decodes with).

// otlpAnswer is one HTTP answer of /v1/traces.
type otlpAnswer struct {
	status int
	header http.Header
	body   []byte
}

func postOTLP(t *testing.T, url, key string, header map[string]string, body []byte) otlpAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/traces", bytes.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return otlpAnswer{status: res.StatusCode, header: res.Header, body: b}
}

// exportResponse decodes a 200's ExportTraceServiceResponse in the
// encoding the answer names.
func (a otlpAnswer) exportResponse(t *testing.T) ptraceotlp.ExportResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	resp := ptraceotlp.NewExportResponse()
	switch a.header.Get("Content-Type") {
	case "application/json":
		require.NoError(t, resp.UnmarshalJSON(a.body), "%s", a.body)
	case "application/x-protobuf":
		require.NoError(t, resp.UnmarshalProto(a.body))
	default:
		t.Fatalf("Content-Type %q", a.header.Get("Content-Type"))
	}
	return resp
}

// rpcStatus decodes an error answer's google.rpc.Status in the encoding
// the answer names.
func (a otlpAnswer) rpcStatus(t *testing.T, want int) *rpcstatus.Status {
	t.Helper()
	require.Equal(t, want, a.status, "%s", a.body)
	st := &rpcstatus.Status{}
	switch a.header.Get("Content-Type") {
	case "application/json":
		require.NoError(t, protojson.Unmarshal(a.body, st), "%s", a.body)
	case "application/x-protobuf":
		require.NoError(t, proto.Unmarshal(a.body, st))
	default:
		t.Fatalf("Content-Type %q", a.header.Get("Content-Type"))
	}
	require.NotEmpty(t, st.Message)
	return st
}

// recorded returns the tenant's recorded actions, in the order they were
// recorded.
func (e *env) recorded(tenantID string) []commitlayer.ActionRecord {
	e.t.Helper()
	rows, err := e.db.Pool().Query(context.Background(), `SELECT id FROM actions WHERE tenant_id = $1 ORDER BY created_at, id`, tenantID)
	require.NoError(e.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(e.t, err)
	var out []commitlayer.ActionRecord
	for _, id := range ids {
		rec, err := e.db.GetAction(context.Background(), tenantID, id)
		require.NoError(e.t, err)
		out = append(out, rec)
	}
	return out
}

// flakyStore answers its first fails CreateAction calls as a database
// that cannot be reached.
type flakyStore struct {
	Store
	fails atomic.Int32
}

func (f *flakyStore) CreateAction(ctx context.Context, tenantID string, a commitlayer.Action, s, w time.Time,
	key string, hash []byte) (commitlayer.ActionRecord, bool, error) {
	if f.fails.Add(-1) >= 0 {
		return commitlayer.ActionRecord{}, false, fmt.Errorf("create action: %w: connection refused", commitlayer.ErrUnavailable)
	}
	return f.Store.CreateAction(ctx, tenantID, a, s, w, key, hash)
}

// otelErrors collects what the OpenTelemetry SDK reports through
// otel.Handle (an exporter's partial success among them).
type otelErrors struct {
	mu   sync.Mutex
	errs []error
}

func (o *otelErrors) Handle(err error) { o.mu.Lock(); o.errs = append(o.errs, err); o.mu.Unlock() }
func (o *otelErrors) all() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs...)
}

// TestTracesFromTheOTelGoExporter: spans made with the OpenTelemetry Go
// SDK and sent by its otlptracehttp exporter (protobuf, gzip or not)
// record the bound call; a rejected span comes back as the exporter's
// partial success; a database away answers 503 with Retry-After, the
// exporter retries and the span is recorded once; Temporal away still
// records the action.
func TestTracesFromTheOTelGoExporter(t *testing.T) {
	base := newEnv(t)
	flaky := &flakyStore{Store: base.db}
	e := newEnv(t, withStore(flaky))
	tenantID, key := e.tenant("traces-otel-go")
	e.contract(key, boundPayout)
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()

	handled := &otelErrors{}
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(handled)
	defer otel.SetErrorHandler(prev)

	// spans runs an agent that calls tools, and returns its ended spans.
	spans := func(calls ...map[string]any) []sdktrace.ReadOnlySpan {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "payout-service"))))
		tr := tp.Tracer("agent")
		ctx, agent := tr.Start(context.Background(), "invoke_agent treasurer", trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "treasurer")))
		for i, c := range calls {
			tool, _ := c["tool"].(string)
			_, sp := tr.Start(ctx, "execute_tool "+tool, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
				attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tool),
				attribute.String("gen_ai.tool.call.id", fmt.Sprintf("call_%d", i)),
				attribute.String("gen_ai.tool.call.arguments", c["args"].(string))))
			if c["error"] != nil {
				sp.SetStatus(codes.Error, c["error"].(string))
			}
			sp.End()
		}
		agent.End()
		return rec.Ended()
	}
	exporter := func(opts ...otlptracehttp.Option) sdktrace.SpanExporter {
		exp, err := otlptracehttp.New(context.Background(), append([]otlptracehttp.Option{
			otlptracehttp.WithEndpointURL(ts.URL + "/v1/traces"),
			otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + key}),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond,
				MaxInterval: 100 * time.Millisecond, MaxElapsedTime: 10 * time.Second}),
		}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
		return exp
	}

	t.Run("protobuf", func(t *testing.T) {
		exp := exporter()
		require.NoError(t, exp.ExportSpans(context.Background(), spans(
			map[string]any{"tool": "send_payout", "args": `{"account_id":"acc_1","amount":2500,"currency":"USD"}`},
			map[string]any{"tool": "get_balance", "args": `{"account_id":"acc_1"}`}, // unbound: ignored
		)))
		recs := e.recorded(tenantID)
		require.Len(t, recs, 1)
		require.Equal(t, "treasurer", recs[0].Agent)
		require.Equal(t, commitlayer.Subject("account:acc_1"), recs[0].Subject)
		require.Equal(t, commitlayer.Attrs{"amount": int64(2500), "currency": "USD"}, recs[0].Params)
		require.Empty(t, handled.all(), "a request accepted in full is no partial success")
	})

	t.Run("gzip, a span the binding cannot read", func(t *testing.T) {
		exp := exporter(otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		err := exp.ExportSpans(context.Background(), spans(
			map[string]any{"tool": "send_payout", "args": `{"account_id":"acc_2","amount":100,"currency":"EUR"}`, "error": "ledger timeout"},
			map[string]any{"tool": "send_payout", "args": `{"amount":100}`},
		))
		recs := e.recorded(tenantID)
		require.Len(t, recs, 2)
		require.Equal(t, commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "ledger timeout"}, recs[1].Claim)
		// The exporter tells the partial success: returned (this SDK
		// version) or handed to otel.Handle (older ones).
		if err == nil {
			errs := handled.all()
			require.Len(t, errs, 1)
			err = errs[0]
		}
		require.ErrorContains(t, err, "partial success")
		require.ErrorContains(t, err, "1 spans rejected")
		require.ErrorContains(t, err, "no such key: account_id")
	})

	t.Run("database away, then back", func(t *testing.T) {
		flaky.fails.Store(1)
		exp := exporter()
		began := time.Now()
		require.NoError(t, exp.ExportSpans(context.Background(), spans(
			map[string]any{"tool": "send_payout", "args": `{"account_id":"acc_3","amount":300,"currency":"USD"}`},
		)))
		require.GreaterOrEqual(t, time.Since(began), 900*time.Millisecond, "the exporter waited as Retry-After asked")
		recs := e.recorded(tenantID)
		require.Len(t, recs, 3)
		require.Equal(t, commitlayer.Subject("account:acc_3"), recs[2].Subject)
	})

	t.Run("database away for good", func(t *testing.T) {
		flaky.fails.Store(1 << 20)
		defer flaky.fails.Store(0)
		exp := exporter(otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
		err := exp.ExportSpans(context.Background(), spans(
			map[string]any{"tool": "send_payout", "args": `{"account_id":"acc_4","amount":400,"currency":"USD"}`},
		))
		require.ErrorContains(t, err, "retry-able request failure", "a 503 the exporter would retry")
		require.ErrorContains(t, err, "retry shortly")
		require.Len(t, e.recorded(tenantID), 3)
	})

	t.Run("Temporal away", func(t *testing.T) {
		e.ver.mu.Lock()
		e.ver.startErr = errors.New("temporal: connection refused")
		e.ver.mu.Unlock()
		defer func() { e.ver.mu.Lock(); e.ver.startErr = nil; e.ver.mu.Unlock() }()
		exp := exporter()
		require.NoError(t, exp.ExportSpans(context.Background(), spans(
			map[string]any{"tool": "send_payout", "args": `{"account_id":"acc_5","amount":500,"currency":"USD"}`},
		)))
		recs := e.recorded(tenantID)
		require.Len(t, recs, 4, "recorded; the reconciler starts its verification")
		require.Equal(t, commitlayer.Subject("account:acc_5"), recs[3].Subject)
	})

	t.Run("wrong key", func(t *testing.T) {
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(ts.URL+"/v1/traces"),
			otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer cl_not_a_key"}))
		require.NoError(t, err)
		err = exp.ExportSpans(context.Background(), spans(map[string]any{"tool": "send_payout", "args": `{}`}))
		require.Error(t, err)
		require.Contains(t, err.Error(), "401")
		require.Contains(t, err.Error(), "invalid API key", "the exporter read the google.rpc.Status")
	})
}

// otlpJSONRequest is an OTLP/JSON request as the JavaScript exporter and
// collectors write it: lowerCamelCase, hex ids, enums and times as
// numbers or strings, structured and string arguments, several
// resources and scopes, fields this server does not know.
const otlpJSONRequest = `{
  "resourceSpans": [
    {
      "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "node-agent"}}], "droppedAttributesCount": 0},
      "scopeSpans": [
        {
          "scope": {"name": "@example/agent-sdk", "version": "1.2.3"},
          "spans": [
            {"traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "EEE19B7EC3C1B174", "name": "invoke_agent treasurer",
             "kind": 1, "startTimeUnixNano": 1764579600000000000, "endTimeUnixNano": "1764579605000000000",
             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                            {"key": "gen_ai.agent.name", "value": {"stringValue": "treasurer"}}],
             "status": {}, "flags": 257, "somethingNew": {"a": [1, 2, 3]}},
            {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "0000000000000001", "parentSpanId": "eee19b7ec3c1b174",
             "name": "execute_tool send_payout", "kind": 1, "startTimeUnixNano": "1764579601000000000", "endTimeUnixNano": "1764579602000000000",
             "attributes": [
               {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
               {"key": "gen_ai.tool.name", "value": {"stringValue": "send_payout"}},
               {"key": "gen_ai.tool.call.arguments", "value": {"kvlistValue": {"values": [
                 {"key": "account_id", "value": {"stringValue": "acc_j1"}},
                 {"key": "amount", "value": {"intValue": 1250}},
                 {"key": "currency", "value": {"stringValue": "USD"}}]}}}],
             "status": {"code": 1}}
          ]
        },
        {
          "scope": {"name": "@example/mcp-client"},
          "spans": [
            {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "0000000000000002", "parentSpanId": "eee19b7ec3c1b174",
             "name": "tools/call send_payout", "kind": 3, "startTimeUnixNano": "1764579602000000000",
             "attributes": [
               {"key": "mcp.method.name", "value": {"stringValue": "tools/call"}},
               {"key": "gen_ai.tool.name", "value": {"stringValue": "send_payout"}},
               {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "{\"account_id\":\"acc_j2\",\"amount\":\"99\",\"currency\":\"EUR\"}"}},
               {"key": "error.type", "value": {"stringValue": "tool_error"}}]}
          ]
        }
      ]
    },
    {
      "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "python-agent"}}]},
      "scopeSpans": [
        {"scope": {"name": "opentelemetry.instrumentation.genai"},
         "spans": [
            {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "execute_tool send_payout",
             "kind": "SPAN_KIND_INTERNAL", "startTimeUnixNano": "1764579603000000000",
             "attributes": [{"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "{\"account_id\":\"acc_j3\",\"amount\":7,\"currency\":\"USD\"}"}}]},
            {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203332", "name": "execute_tool lookup_account",
             "startTimeUnixNano": "1764579604000000000",
             "attributes": [{"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "{\"account_id\":\"acc_j3\"}"}}]},
            {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203333", "name": "chat gpt-5",
             "startTimeUnixNano": "1764579605000000000",
             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]}
         ]}
      ]
    }
  ]
}`

// TestTracesRawOTLPJSON: a hand-written OTLP/JSON request (above), plain
// and in snake_case, with a charset parameter, gzip or not.
func TestTracesRawOTLPJSON(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("traces-raw-json")
	e.contract(key, boundPayout)
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()

	res := postOTLP(t, ts.URL, key, map[string]string{"Content-Type": "application/json; charset=utf-8"}, []byte(otlpJSONRequest))
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	require.JSONEq(t, `{}`, string(res.body), "accepted in full: partial_success unset")
	recs := e.recorded(tenantID)
	require.Len(t, recs, 3)
	bySubject := map[commitlayer.Subject]commitlayer.ActionRecord{}
	for _, r := range recs {
		bySubject[r.Subject] = r
	}
	j1 := bySubject["account:acc_j1"]
	require.Equal(t, "treasurer", j1.Agent)
	require.Equal(t, commitlayer.Attrs{"amount": int64(1250), "currency": "USD"}, j1.Params)
	require.Equal(t, commitlayer.ClaimSuccess, j1.Claim.Status)
	require.Contains(t, string(j1.Trace), `"trace_id": "5b8efff798038103d269b633813fc60c"`, "ids as lower-case hex")
	require.Contains(t, string(j1.Trace), `"span_id": "0000000000000001"`)
	j2 := bySubject["account:acc_j2"]
	require.Equal(t, "treasurer", j2.Agent, "the MCP client span under the agent")
	require.Equal(t, commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "tool_error"}, j2.Claim)
	require.Equal(t, commitlayer.Attrs{"amount": "99", "currency": "EUR"}, j2.Params)
	j3 := bySubject["account:acc_j3"]
	require.Equal(t, "python-agent", j3.Agent, "no agent span: the resource's service.name")
	require.Equal(t, time.Date(2025, 12, 1, 9, 0, 3, 0, time.UTC), j3.RequestedAt.UTC())

	// The same spans in snake_case and enum names, gzipped: the
	// exporter's retry of the same spans records nothing new.
	snake := strings.NewReplacer(`"resourceSpans"`, `"resource_spans"`, `"scopeSpans"`, `"scope_spans"`,
		`"traceId"`, `"trace_id"`, `"spanId"`, `"span_id"`, `"parentSpanId"`, `"parent_span_id"`,
		`"startTimeUnixNano"`, `"start_time_unix_nano"`, `"endTimeUnixNano"`, `"end_time_unix_nano"`,
		`"stringValue"`, `"string_value"`, `"intValue"`, `"int_value"`, `"kvlistValue"`, `"kvlist_value"`,
		`"kind": 1`, `"kind": "SPAN_KIND_INTERNAL"`).Replace(otlpJSONRequest)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(snake))
	require.NoError(t, zw.Close())
	res = postOTLP(t, ts.URL, key, map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, gz.Bytes())
	require.Zero(t, res.exportResponse(t).PartialSuccess().RejectedSpans())
	require.Len(t, e.recorded(tenantID), 3, "the same spans: nothing new")
}

// Hand-written protobuf: the OTLP messages' field numbers, encoded with
// protowire.
func pbString(b []byte, field protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, field, protowire.BytesType), s)
}

func pbBytes(b []byte, field protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, field, protowire.BytesType), v)
}

func pbKV(key string, anyValue []byte) []byte {
	return pbBytes(pbString(nil, 1, key), 2, anyValue)
}

func pbStr(s string) []byte { return pbString(nil, 1, s) } // AnyValue.string_value

func pbInt(i int64) []byte { // AnyValue.int_value
	return protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), uint64(i))
}

func pbKVList(kvs ...[]byte) []byte { // AnyValue.kvlist_value
	var list []byte
	for _, kv := range kvs {
		list = pbBytes(list, 1, kv)
	}
	return pbBytes(nil, 6, list)
}

func pbSpan(traceID, spanID, name string, start uint64, statusCode int, attrs ...[]byte) []byte {
	tid, _ := hex.DecodeString(traceID)
	sid, _ := hex.DecodeString(spanID)
	b := pbBytes(nil, 1, tid)
	b = pbBytes(b, 2, sid)
	b = pbString(b, 5, name)
	b = protowire.AppendVarint(protowire.AppendTag(b, 6, protowire.VarintType), 1) // SPAN_KIND_INTERNAL
	b = protowire.AppendFixed64(protowire.AppendTag(b, 7, protowire.Fixed64Type), start)
	b = protowire.AppendFixed64(protowire.AppendTag(b, 8, protowire.Fixed64Type), start+1e9)
	for _, a := range attrs {
		b = pbBytes(b, 9, a)
	}
	if statusCode != 0 {
		st := pbString(nil, 2, "failed")
		st = protowire.AppendVarint(protowire.AppendTag(st, 3, protowire.VarintType), uint64(statusCode))
		b = pbBytes(b, 15, st)
	}
	// A field from a future OTLP version: skipped.
	b = pbString(b, 999, "future")
	return b
}

func pbRequest(service string, spans ...[]byte) []byte {
	scope := pbBytes(nil, 1, pbString(nil, 1, "handwritten"))
	for _, s := range spans {
		scope = pbBytes(scope, 2, s)
	}
	rs := pbBytes(nil, 1, pbBytes(nil, 1, pbKV("service.name", pbStr(service))))
	rs = pbBytes(rs, 2, scope)
	return pbBytes(nil, 1, rs)
}

// TestTracesRawProtobuf: a hand-encoded protobuf request records its
// bound spans and names the rejected ones in a protobuf partial success;
// text that is not UTF-8 (protobuf lets a sender put any bytes in a
// string) is a rejected span, not an error of the request.
func TestTracesRawProtobuf(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("traces-raw-proto")
	e.contract(key, boundPayout)
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()

	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	start := uint64(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC).UnixNano())
	body := pbRequest("proto-agent",
		pbSpan(tid, "00f067aa0ba902b7", "execute_tool send_payout", start, 0,
			pbKV("gen_ai.operation.name", pbStr("execute_tool")), pbKV("gen_ai.tool.name", pbStr("send_payout")),
			pbKV("gen_ai.tool.call.arguments", pbKVList(pbKV("account_id", pbStr("acc_p1")), pbKV("amount", pbInt(42)), pbKV("currency", pbStr("USD"))))),
		pbSpan(tid, "00f067aa0ba902b8", "execute_tool send_payout", start+2e9, 2,
			pbKV("gen_ai.tool.call.arguments", pbStr(`{"account_id":"acc_p2","amount":1,"currency":"USD"}`))),
		pbSpan(tid, "00f067aa0ba902b9", "execute_tool send_payout", start+4e9, 0,
			pbKV("gen_ai.tool.call.arguments", pbKVList(pbKV("account_id", pbStr("acc_\xff")), pbKV("amount", pbInt(1)), pbKV("currency", pbStr("USD"))))),
		pbSpan(tid, "00f067aa0ba902ba", "execute_tool send_payout", start+6e9, 0,
			pbKV("gen_ai.tool.call.arguments", pbStr(`{"amount":1}`))),
		pbSpan(tid, "00f067aa0ba902bb", "execute_tool unbound_tool", start+8e9, 0),
	)
	res := postOTLP(t, ts.URL, key, map[string]string{"Content-Type": "application/x-protobuf"}, body)
	require.Equal(t, "application/x-protobuf", res.header.Get("Content-Type"))
	ps := res.exportResponse(t).PartialSuccess()
	require.Equal(t, int64(2), ps.RejectedSpans(), ps.ErrorMessage())
	require.Contains(t, ps.ErrorMessage(), "span 00f067aa0ba902b9")
	require.Contains(t, ps.ErrorMessage(), "not UTF-8")
	require.Contains(t, ps.ErrorMessage(), "span 00f067aa0ba902ba")
	require.Contains(t, ps.ErrorMessage(), "no such key: account_id")
	recs := e.recorded(tenantID)
	require.Len(t, recs, 2)
	require.Equal(t, commitlayer.Subject("account:acc_p1"), recs[0].Subject)
	require.Equal(t, "proto-agent", recs[0].Agent)
	require.Equal(t, commitlayer.Attrs{"amount": int64(42), "currency": "USD"}, recs[0].Params)
	require.Equal(t, commitlayer.Subject("account:acc_p2"), recs[1].Subject)
	require.Equal(t, commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "failed"}, recs[1].Claim)

	// Accepted in full: an empty ExportTraceServiceResponse.
	res = postOTLP(t, ts.URL, key, map[string]string{"Content-Type": "application/x-protobuf"}, pbRequest("proto-agent",
		pbSpan(tid, "00f067aa0ba902b7", "execute_tool send_payout", start, 0,
			pbKV("gen_ai.tool.call.arguments", pbStr(`{"account_id":"acc_p1","amount":42,"currency":"USD"}`)))))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Empty(t, res.body)
	require.Len(t, e.recorded(tenantID), 2)
}

// TestTracesRefusalsAreOTLPStatuses: every refusal of /v1/traces is a
// google.rpc.Status in the request's encoding, with the status OTLP
// gives it: 400 not retryable, 401, 413, 415 (naming what is accepted),
// 503 with Retry-After when the database is away.
func TestTracesRefusalsAreOTLPStatuses(t *testing.T) {
	base := newEnv(t)
	u := &unavailableStore{Store: base.db}
	e := newEnv(t, withStore(u))
	_, key := e.tenant("traces-refusals")
	e.contract(key, boundPayout)
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()
	pb := map[string]string{"Content-Type": "application/x-protobuf"}
	js := map[string]string{"Content-Type": "application/json"}

	for _, h := range []map[string]string{pb, js} {
		for _, k := range []string{"", "cl_unknown", adminKey} {
			res := postOTLP(t, ts.URL, k, h, []byte("{}"))
			require.Equal(t, h["Content-Type"], res.header.Get("Content-Type"), "key %q", k)
			st := res.rpcStatus(t, http.StatusUnauthorized)
			require.Equal(t, int32(16), st.Code) // UNAUTHENTICATED
			require.NotEmpty(t, res.header.Get("WWW-Authenticate"))
		}
	}

	res := postOTLP(t, ts.URL, key, map[string]string{"Content-Type": "text/plain"}, []byte("x"))
	require.Contains(t, res.rpcStatus(t, http.StatusUnsupportedMediaType).Message, "application/x-protobuf or application/json")
	require.Equal(t, "application/x-protobuf, application/json", res.header.Get("Accept-Post"))

	res = postOTLP(t, ts.URL, key, map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "zstd"}, []byte("x"))
	require.Contains(t, res.rpcStatus(t, http.StatusUnsupportedMediaType).Message, `Content-Encoding "zstd"`)
	require.Equal(t, "gzip, identity", res.header.Get("Accept-Encoding"))

	b64 := strings.Replace(otlpJSONRequest, "5B8EFFF798038103D269B633813FC60C", "W47/95gDgQPSabYzgT/GDA==", 1)
	res = postOTLP(t, ts.URL, key, js, []byte(b64))
	st := res.rpcStatus(t, http.StatusBadRequest)
	require.Contains(t, st.Message, "hex strings")
	require.Empty(t, res.header.Get("Retry-After"), "bad data is not retryable")

	res = postOTLP(t, ts.URL, key, pb, []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	require.Equal(t, int32(3), res.rpcStatus(t, http.StatusBadRequest).Code) // INVALID_ARGUMENT

	res = postOTLP(t, ts.URL, key, pb, bytes.Repeat([]byte{0}, MaxTracesBody+1))
	res.rpcStatus(t, http.StatusRequestEntityTooLarge)

	// The database away: retryable, in the request's encoding.
	u.downWrites = true
	res = postOTLP(t, ts.URL, key, pb, pbRequest("svc", pbSpan("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7",
		"execute_tool send_payout", uint64(time.Now().UnixNano()), 0,
		pbKV("gen_ai.tool.call.arguments", pbStr(`{"account_id":"acc_1","amount":1,"currency":"USD"}`)))))
	require.Equal(t, int32(14), res.rpcStatus(t, http.StatusServiceUnavailable).Code) // UNAVAILABLE
	require.Equal(t, "1", res.header.Get("Retry-After"))
	require.NotContains(t, string(res.body), "secret detail")
	u.downWrites = false

	u.downAuth = true
	res = postOTLP(t, ts.URL, key, js, []byte("{}"))
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	res.rpcStatus(t, http.StatusServiceUnavailable)
	require.Equal(t, "1", res.header.Get("Retry-After"))
	u.downAuth = false
}

// TestTracesManySpans: one request of many resources, scopes and spans:
// every bound span recorded once, unbound and other spans ignored, the
// rejected ones counted, not failing the rest.
func TestTracesManySpans(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("traces-many")
	e.contract(key, boundPayout)
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()

	var b strings.Builder
	b.WriteString(`{"resourceSpans":[`)
	const resources, perScope = 5, 20
	for r := range resources {
		if r > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc-%d"}}]},"scopeSpans":[`, r)
		for s := range 2 {
			if s > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"scope":{"name":"s"},"spans":[`)
			for i := range perScope {
				if i > 0 {
					b.WriteString(",")
				}
				n := (r*2+s)*perScope + i
				switch i % 4 {
				case 0, 1: // bound
					fmt.Fprintf(&b, `{"traceId":"%032x","spanId":"%016x","name":"execute_tool send_payout","startTimeUnixNano":"%d","attributes":[{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{\"account_id\":\"acc_%d\",\"amount\":%d,\"currency\":\"USD\"}"}}]}`,
						n+1, n+1, 1764579600000000000+int64(n)*1e6, n, n+1)
				case 2: // unbound
					fmt.Fprintf(&b, `{"traceId":"%032x","spanId":"%016x","name":"execute_tool lookup","startTimeUnixNano":"%d"}`, n+1, n+1, 1764579600000000000+int64(n)*1e6)
				case 3: // bound, arguments the binding cannot read
					fmt.Fprintf(&b, `{"traceId":"%032x","spanId":"%016x","name":"execute_tool send_payout","startTimeUnixNano":"%d","attributes":[{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{}"}}]}`,
						n+1, n+1, 1764579600000000000+int64(n)*1e6)
				}
			}
			b.WriteString(`]}`)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	total := resources * 2 * perScope
	res := postOTLP(t, ts.URL, key, map[string]string{"Content-Type": "application/json"}, []byte(b.String()))
	ps := res.exportResponse(t).PartialSuccess()
	require.Equal(t, int64(total/4), ps.RejectedSpans())
	require.LessOrEqual(t, len(ps.ErrorMessage()), maxPartialMessage+len("…"))
	require.Len(t, e.recorded(tenantID), total/2)
}
