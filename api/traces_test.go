package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
)

func init() {
	// OTLP answers in protobuf are checked as bytes (their type and status).
	openapi3filter.RegisterBodyDecoder("application/x-protobuf", openapi3filter.FileBodyDecoder)
}

const boundPayout = `id: send_payout
kind: action
subject: account
settlement: 10m
sources: [ledger]
effects:
  - id: payout
    source: ledger
    type: payout_sent
bindings:
  - tool: send_payout
    subject: "'account:' + args.account_id"
    params: {amount: args.amount, currency: args.currency}
`

// otlpSpan is one span to put in an export request.
type otlpSpan struct {
	trace, span, parent byte // ids are these bytes repeated; 0 is none
	name                string
	attrs               map[string]any
	errStatus           string
	start               time.Time
}

func exportRequest(t testing.TB, service string, spans ...otlpSpan) ptraceotlp.ExportRequest {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if service != "" {
		rs.Resource().Attributes().PutStr("service.name", service)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	for _, s := range spans {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(s.name)
		sp.SetTraceID(pcommon.TraceID(bytes.Repeat([]byte{s.trace}, 16)))
		sp.SetSpanID(pcommon.SpanID(bytes.Repeat([]byte{s.span}, 8)))
		if s.parent != 0 {
			sp.SetParentSpanID(pcommon.SpanID(bytes.Repeat([]byte{s.parent}, 8)))
		}
		start := s.start
		if start.IsZero() {
			start = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		}
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
		require.NoError(t, sp.Attributes().FromRaw(s.attrs))
		if s.errStatus != "" {
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage(s.errStatus)
		}
	}
	return ptraceotlp.NewExportRequestFromTraces(td)
}

func toolSpan(trace, span, parent byte, tool string, args any) otlpSpan {
	attrs := map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": "call_1"}
	if args != nil {
		b, _ := json.Marshal(args)
		attrs["gen_ai.tool.call.arguments"] = string(b)
	}
	return otlpSpan{trace: trace, span: span, parent: parent, name: "execute_tool " + tool, attrs: attrs}
}

func agentSpan(trace, span byte, agent string) otlpSpan {
	return otlpSpan{trace: trace, span: span, name: "invoke_agent " + agent,
		attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}}
}

func (e *env) postTraces(key string, body []byte, header map[string]string) apitest.Response {
	e.t.Helper()
	return e.do(apitest.Request{Method: "POST", Path: "/v1/traces", Key: key, Body: body, Header: header})
}

func jsonBody(t testing.TB, r ptraceotlp.ExportRequest) []byte {
	b, err := r.MarshalJSON()
	require.NoError(t, err)
	return b
}

// partial decodes an OTLP/JSON ExportTraceServiceResponse.
func partial(t testing.TB, res apitest.Response) (rejected int64, message string) {
	t.Helper()
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	resp := ptraceotlp.NewExportResponse()
	require.NoError(t, resp.UnmarshalJSON(res.Body), "%s", res.Body)
	return resp.PartialSuccess().RejectedSpans(), resp.PartialSuccess().ErrorMessage()
}

func TestTracesRecordBoundToolSpans(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("traces")
	e.contract(key, boundPayout)
	ctype := map[string]string{"Content-Type": "application/json"}

	body := jsonBody(t, exportRequest(t, "payout-service",
		agentSpan(1, 1, "treasurer"),
		toolSpan(1, 2, 1, "send_payout", map[string]any{"account_id": "acc_1", "amount": 2500, "currency": "USD"}),
		toolSpan(1, 3, 1, "get_account", map[string]any{"account_id": "acc_1"}), // unbound
		otlpSpan{trace: 1, span: 4, parent: 1, name: "chat gpt-5", attrs: map[string]any{"gen_ai.operation.name": "chat"}},
	))
	rejected, msg := partial(t, e.postTraces(key, body, ctype))
	require.Zero(t, rejected, msg)
	require.Empty(t, msg)
	e.startsReach(1)
	starts := e.ver.startCalls()
	require.Len(t, starts, 1)
	actionID := strings.TrimPrefix(starts[0], tenantID+"/")

	rec, err := e.db.GetAction(context.Background(), tenantID, actionID)
	require.NoError(t, err)
	require.Equal(t, "send_payout", rec.Contract)
	require.Equal(t, "treasurer", rec.Agent, "agent from the invoke_agent parent")
	require.Equal(t, commitlayer.Subject("account:acc_1"), rec.Subject)
	require.Equal(t, commitlayer.Attrs{"amount": int64(2500), "currency": "USD"}, rec.Params)
	require.Equal(t, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), rec.RequestedAt.UTC())
	require.Equal(t, commitlayer.ClaimSuccess, rec.Claim.Status)
	require.Contains(t, string(rec.Trace), `"span_id": "0202020202020202"`)

	// The exporter's retry: nothing new recorded, nothing started again.
	e.waitStarted(tenantID, actionID)
	rejected, _ = partial(t, e.postTraces(key, body, ctype))
	require.Zero(t, rejected)
	e.startsReach(1)
	require.Len(t, e.ver.startCalls(), 1)

	spans := func(result string) float64 { return testutil.ToFloat64(e.srv.otlpSpans.WithLabelValues(result)) }
	require.Equal(t, 1.0, spans(spanRecorded))
	require.Equal(t, 1.0, spans(spanReplayed))
	require.Equal(t, 2.0, spans(spanUnbound))
	require.Equal(t, 4.0, spans(spanIgnored))
	require.Zero(t, spans(spanRejected))
	metrics := e.do(apitest.Request{Method: "GET", Path: "/metrics"})
	require.Contains(t, string(metrics.Body), `commitlayer_otlp_spans_total{result="unbound"} 2`)

	// Protobuf, gzip; a failed call (status Error) claims failure; no
	// parent in the request: the agent is the resource's service.name.
	failed := toolSpan(2, 1, 9, "send_payout", map[string]any{"account_id": "acc_2", "amount": 100, "currency": "EUR"})
	failed.errStatus = "ledger timeout"
	pb, err := exportRequest(t, "payout-service", failed).MarshalProto()
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	require.NoError(t, zw.Close())
	res := e.postTraces(key, gz.Bytes(), map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "application/x-protobuf", res.Header.Get("Content-Type"))
	resp := ptraceotlp.NewExportResponse()
	require.NoError(t, resp.UnmarshalProto(res.Body))
	require.Zero(t, resp.PartialSuccess().RejectedSpans())
	e.startsReach(2)
	starts = e.ver.startCalls()
	require.Len(t, starts, 2)
	rec, err = e.db.GetAction(context.Background(), tenantID, strings.TrimPrefix(starts[1], tenantID+"/"))
	require.NoError(t, err)
	require.Equal(t, "payout-service", rec.Agent)
	require.Equal(t, commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "ledger timeout"}, rec.Claim)
	require.Equal(t, commitlayer.Subject("account:acc_2"), rec.Subject)

	// Another tenant's spans never see these bindings.
	_, other := e.tenant("traces-other")
	rejected, _ = partial(t, e.postTraces(other, body, ctype))
	require.Zero(t, rejected)
	e.startsReach(2)
	require.Len(t, e.ver.startCalls(), 2)
}

func TestTracesRejectBoundSpansThatCannotBeActions(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("traces-reject")
	e.contract(key, boundPayout)
	noArgs := toolSpan(3, 1, 0, "send_payout", nil)
	notJSON := toolSpan(3, 2, 0, "send_payout", nil)
	notJSON.attrs["gen_ai.tool.call.arguments"] = "account_id=acc_1"
	wrongType := toolSpan(3, 3, 0, "send_payout", map[string]any{"account_id": "acc 1"})
	good := toolSpan(3, 4, 0, "send_payout", map[string]any{"account_id": "acc_9", "amount": 1, "currency": "USD"})
	body := jsonBody(t, exportRequest(t, "svc", noArgs, notJSON, wrongType, good))
	rejected, msg := partial(t, e.postTraces(key, body, map[string]string{"Content-Type": "application/json"}))
	require.Equal(t, int64(3), rejected)
	require.Contains(t, msg, "no such key: account_id")
	require.Contains(t, msg, "gen_ai.tool.call.arguments is not JSON")
	require.Contains(t, msg, "id contains whitespace")
	e.startsReach(1)
	require.Len(t, e.ver.startCalls(), 1, "the good span is recorded beside the rejected ones")
	require.Equal(t, 3.0, testutil.ToFloat64(e.srv.otlpSpans.WithLabelValues(spanRejected)))
}

func TestTracesErrorAnswers(t *testing.T) {
	e := newEnv(t, func(c *Config) {})
	_, key := e.tenant("traces-errors")
	e.contract(key, boundPayout)
	status := func(t *testing.T, res apitest.Response, want int) string {
		t.Helper()
		require.Equal(t, want, res.Status, "%s", res.Body)
		var st rpcstatus.Status
		if res.Header.Get("Content-Type") == "application/x-protobuf" {
			require.NoError(t, proto.Unmarshal(res.Body, &st))
		} else {
			require.Equal(t, "application/json", res.Header.Get("Content-Type"))
			var m map[string]any
			require.NoError(t, json.Unmarshal(res.Body, &m), "%s", res.Body)
			st.Message, _ = m["message"].(string)
			code, _ := m["code"].(float64)
			st.Code = int32(code)
		}
		require.NotEmpty(t, st.Message)
		require.NotZero(t, st.Code)
		return st.Message
	}
	t.Run("malformed json", func(t *testing.T) {
		msg := status(t, e.postTraces(key, []byte(`{"resourceSpans": [{"scopeSpans": 7}]}`), map[string]string{"Content-Type": "application/json"}), http.StatusBadRequest)
		require.Contains(t, msg, "ExportTraceServiceRequest")
	})
	t.Run("malformed protobuf", func(t *testing.T) {
		status(t, e.postTraces(key, []byte{0xff, 0xff, 0xff}, map[string]string{"Content-Type": "application/x-protobuf"}), http.StatusBadRequest)
	})
	t.Run("broken gzip", func(t *testing.T) {
		msg := status(t, e.postTraces(key, []byte("not gzip"), map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}), http.StatusBadRequest)
		require.Contains(t, msg, "gzip")
	})
	t.Run("content type", func(t *testing.T) {
		status(t, e.postTraces(key, []byte("x"), map[string]string{"Content-Type": "text/plain"}), http.StatusUnsupportedMediaType)
	})
	t.Run("content encoding", func(t *testing.T) {
		status(t, e.postTraces(key, []byte("x"), map[string]string{"Content-Type": "application/json", "Content-Encoding": "br"}), http.StatusUnsupportedMediaType)
	})
	t.Run("too large", func(t *testing.T) {
		big := bytes.Repeat([]byte(" "), MaxTracesBody+1)
		status(t, e.postTraces(key, big, map[string]string{"Content-Type": "application/json"}), http.StatusRequestEntityTooLarge)
	})
	t.Run("gzip bomb", func(t *testing.T) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(bytes.Repeat([]byte(" "), MaxTracesBody+10))
		require.NoError(t, zw.Close())
		require.Less(t, gz.Len(), MaxTracesBody)
		msg := status(t, e.postTraces(key, gz.Bytes(), map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}), http.StatusRequestEntityTooLarge)
		require.Contains(t, msg, "decompressed")
	})
	t.Run("no key", func(t *testing.T) {
		res := e.postTraces("", []byte("{}"), map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusUnauthorized, res.Status)
	})
	t.Run("empty request", func(t *testing.T) {
		rejected, _ := partial(t, e.postTraces(key, []byte("{}"), map[string]string{"Content-Type": "application/json"}))
		require.Zero(t, rejected)
	})
	require.Empty(t, e.ver.startCalls())
}
