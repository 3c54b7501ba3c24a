package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/otlpingest"
)

// nestedAttr is an OTLP/JSON request whose one span's attribute value is
// nested in levels arrays (or kvlists).
func nestedAttr(levels int, kvlist bool) []byte {
	open, closing := `{"arrayValue":{"values":[`, `]}}`
	if kvlist {
		open, closing = `{"kvlistValue":{"values":[{"key":"k","value":`, `}]}}`
	}
	return []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708",
		"name":"execute_tool lookup","attributes":[{"key":"gen_ai.tool.call.result","value":` +
		strings.Repeat(open, levels) + `{"intValue":"1"}` + strings.Repeat(closing, levels) + `}]}]}]}]}`)
}

// TestTracesOneNestingBoundOnBothEncodings (issue 45, 1): an attribute
// value inside MaxAnyValueDepth arrays or kvlists is read, one level more
// is a 400, the same in OTLP/JSON (refused as it is read) and protobuf.
func TestTracesOneNestingBoundOnBothEncodings(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("traces-nesting")
	js := map[string]string{"Content-Type": "application/json"}
	pb := map[string]string{"Content-Type": "application/x-protobuf"}
	for _, kvlist := range []bool{false, true} {
		rejected, _ := partial(t, e.postTraces(key, nestedAttr(otlpingest.MaxAnyValueDepth, kvlist), js))
		require.Zero(t, rejected)
		res := e.postTraces(key, protoNested(otlpingest.MaxAnyValueDepth, kvlist), pb)
		require.Equal(t, http.StatusOK, res.Status, "kvlist %v: %s", kvlist, res.Body)
		for _, res := range []apitest.Response{
			e.postTraces(key, nestedAttr(otlpingest.MaxAnyValueDepth+1, kvlist), js),
			e.postTraces(key, protoNested(otlpingest.MaxAnyValueDepth+1, kvlist), pb),
		} {
			require.Equal(t, http.StatusBadRequest, res.Status, "kvlist %v: %s", kvlist, res.Body)
			require.Contains(t, string(res.Body), "nested in more than 32 arrays and kvlists")
		}
	}
}

// protoNested is nestedAttr in protobuf: AnyValue{array_value{values
// [AnyValue…]}} or AnyValue{kvlist_value{values[KeyValue{"k", AnyValue…}]}}.
func protoNested(levels int, kvlist bool) []byte {
	v := pbInt(1)
	for range levels {
		if kvlist {
			v = pbBytes(nil, 6, pbBytes(nil, 1, pbKV("k", v)))
		} else {
			v = pbBytes(nil, 5, pbBytes(nil, 1, v))
		}
	}
	return pbRequest("svc", pbSpan("0102030405060708090a0b0c0d0e0f10", "0102030405060708", "execute_tool lookup", 1, 0,
		pbKV("gen_ai.tool.call.result", v)))
}

// TestTracesStrictJSON (issue 45, 4): trailing data, a second value,
// invalid UTF-8 or a lone surrogate in a span's name, a name given twice:
// 400, nothing read.
func TestTracesStrictJSON(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("traces-strict")
	e.contract(key, boundPayout)
	span := func(name string) string {
		return `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"` +
			name + `","startTimeUnixNano":"1764579600000000000","attributes":[{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{\"account_id\":\"acc_1\",\"amount\":1,\"currency\":\"USD\"}"}}]}]}]}]}`
	}
	good := span("execute_tool send_payout")
	for _, body := range []string{
		`{} xyz`, `{}{}`, `{} {}`, good + `]`, good + good,
		span("execute_tool send_payout\xff"),
		span(`execute_tool send_payout\ud800`),
		`{"resourceSpans":[],"resourceSpans":[]}`,
	} {
		res := e.postTraces(key, []byte(body), map[string]string{"Content-Type": "application/json"})
		require.Equal(t, http.StatusBadRequest, res.Status, "%.60q: %s", body, res.Body)
	}
	require.Empty(t, e.ver.startCalls())
	rejected, _ := partial(t, e.postTraces(key, []byte(good+"\n\t "), map[string]string{"Content-Type": "application/json"}))
	require.Zero(t, rejected)
	e.startsReach(1)
	require.Len(t, e.ver.startCalls(), 1, "trailing whitespace is no trailing data")
}

// TestTracesObeyTheActionRules (issue 45, 2): what POST /v1/actions
// refuses, a span does not record: a start past the server's clock plus
// the skew (its verification would sleep until then), params over the
// 1 MiB an action's body may hold, an agent or subject over their bounds.
// Each is a rejected span with its reason; the good span beside them is
// recorded; the same action posted to /v1/actions is refused alike.
func TestTracesObeyTheActionRules(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("traces-rules")
	e.contract(key, boundPayout)
	future := toolSpan(5, 1, 0, "send_payout", map[string]any{"account_id": "acc_1", "amount": 1, "currency": "USD"})
	future.start = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	big := toolSpan(6, 1, 0, "send_payout", map[string]any{"account_id": "acc_2", "amount": 1, "currency": strings.Repeat("x", 2<<20)})
	longAgent := toolSpan(7, 1, 0, "send_payout", map[string]any{"account_id": "acc_3", "amount": 1, "currency": "USD"})
	longAgent.attrs["gen_ai.agent.name"] = strings.Repeat("a", commitlayer.MaxAgentLen+1)
	longSubject := toolSpan(8, 1, 0, "send_payout", map[string]any{"account_id": strings.Repeat("s", commitlayer.MaxSubjectLen), "amount": 1, "currency": "USD"})
	good := toolSpan(9, 1, 0, "send_payout", map[string]any{"account_id": "acc_9", "amount": 1, "currency": "USD"})
	body := jsonBody(t, exportRequest(t, "svc", future, big, longAgent, longSubject, good))
	rejected, msg := partial(t, e.postTraces(key, body, map[string]string{"Content-Type": "application/json"}))
	require.Equal(t, int64(4), rejected, msg)
	for _, want := range []string{
		"requested_at: 2200-01-01T00:00:00Z is later than",
		"more than the 1048576 bytes of a POST /v1/actions body",
		"agent: is longer than 256 bytes",
		"subject",
	} {
		require.Contains(t, msg, want)
	}
	recs := e.recorded(tenantID)
	require.Len(t, recs, 1)
	require.Equal(t, commitlayer.Subject("account:acc_9"), recs[0].Subject)

	// The API's own door says the same of the same action.
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "send_payout", "agent": "a", "subject": "account:acc_1", "requested_at": "2200-01-01T00:00:00Z",
		"params": map[string]any{"amount": 1}}})
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Contains(t, string(res.Body), "requested_at: 2200-01-01T00:00:00Z is later than")
}

// slowStarts is a Temporal that answers, slowly: each Start waits for
// release, inside its deadline or not (300 starts took minutes, each
// within the API's start timeout).
type slowStarts struct {
	*fakeVerifier
	release chan struct{}
}

func (v slowStarts) Start(ctx context.Context, tenantID string, a commitlayer.ActionRecord) error {
	<-v.release
	return v.fakeVerifier.Start(ctx, tenantID, a)
}

// TestTracesAnswerBeforeTheVerificationsStart (issue 45, 3): 300 bound
// spans in one request are recorded and answered while Temporal has not
// started one verification (an exporter gives up after 10 s; 300 starts
// took minutes); the starts follow the answer.
func TestTracesAnswerBeforeTheVerificationsStart(t *testing.T) {
	slow := slowStarts{fakeVerifier: &fakeVerifier{}, release: make(chan struct{})}
	e := newEnv(t, withVerifier(slow))
	tenantID, key := e.tenant("traces-answer-first")
	e.contract(key, boundPayout)
	var spans []otlpSpan
	for i := range 300 {
		s := toolSpan(byte(1+i/250), byte(1+i%250), 0, "send_payout", map[string]any{"account_id": fmt.Sprint("acc_", i), "amount": i + 1, "currency": "USD"})
		spans = append(spans, s)
	}
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()
	answered := make(chan otlpAnswer, 1)
	go func() {
		answered <- postOTLP(t, ts.URL, key, map[string]string{"Content-Type": "application/json"}, jsonBody(t, exportRequest(t, "svc", spans...)))
	}()
	select {
	case a := <-answered:
		require.Zero(t, a.exportResponse(t).PartialSuccess().RejectedSpans())
	case <-time.After(60 * time.Second): // a deadlock, not a speed: nothing starts until the answer is in
		close(slow.release)
		t.Fatal("no answer while no verification could start")
	}
	require.Empty(t, slow.startCalls(), "answered before any start")
	close(slow.release)
	require.Eventually(t, func() bool { return len(slow.startCalls()) == 300 }, 60*time.Second, 50*time.Millisecond)
	for _, s := range slow.startCalls() {
		require.True(t, strings.HasPrefix(s, tenantID+"/"))
	}
}

// TestTracesRejectionsAreKeptAndListed (issue 47): a span that looks like
// a bound call but cannot be read is rejected with a message naming its
// dialect and the missing key, kept (the newest per tenant, in
// PostgreSQL, for every replica) and listed by GET /v1/sources; an
// unbound tool's unreadable span is not.
func TestTracesRejectionsAreKeptAndListed(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("traces-rejections")
	e.contract(key, boundPayout)
	oi := otlpSpan{trace: 3, span: 1, name: "send_payout", attrs: map[string]any{"openinference.span.kind": "TOOL", "tool.name": "send_payout",
		"input.value": "acc_1", "input.mime_type": "text/plain"}}
	unknown := otlpSpan{trace: 3, span: 2, name: "send_payout", attrs: map[string]any{"framework.args": "{}"}}
	unbound := otlpSpan{trace: 3, span: 3, name: "lookup", attrs: map[string]any{"openinference.span.kind": "TOOL", "tool.name": "lookup"}}
	rejected, msg := partial(t, e.postTraces(key, jsonBody(t, exportRequest(t, "svc", oi, unknown, unbound)), map[string]string{"Content-Type": "application/json"}))
	require.Equal(t, int64(2), rejected, msg)
	require.Contains(t, msg, "(openinference) of tool send_payout: input.value is text/plain (input.mime_type)")
	require.Contains(t, msg, `is named "send_payout", a bound tool, but is in no dialect CommitLayer reads`)

	res := e.do(apitest.Request{Method: "GET", Path: "/v1/sources", Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	var out struct {
		Rejections []client.SpanRejection `json:"span_rejections"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &out))
	require.Len(t, out.Rejections, 2)
	byDialect := map[string]client.SpanRejection{}
	for _, r := range out.Rejections {
		byDialect[r.Dialect] = r
	}
	require.Equal(t, "send_payout", byDialect["openinference"].Tool)
	require.Equal(t, "0303030303030303"+"0303030303030303", byDialect["openinference"].TraceID)
	require.Contains(t, byDialect["openinference"].Message, "input.value")
	require.Contains(t, byDialect[""].Message, "no dialect")

	_, other := e.tenant("traces-rejections-other")
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/sources", Key: other})
	require.JSONEq(t, `{"sources":[],"span_rejections":[]}`, string(res.Body))
}

// rssBytes reads one of the process's memory figures (VmRSS, VmHWM).
func rssBytes(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status: RSS is measured on Linux")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestTracesNestingBombsStayWithinMemory (issue 45, 1): six OTLP/JSON
// requests in parallel, each an attribute nested 280 000 levels deep
// (~18 KB gzipped, as reported), are refused as they are read: the
// process's peak RSS stays within 64 MiB of its idle RSS (reported).
func TestTracesNestingBombsStayWithinMemory(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("traces-bombs")
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = zw.Write(nestedAttr(280_000, false))
	require.NoError(t, zw.Close())
	t.Logf("one request: %d bytes gzipped", gz.Len())

	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	idle := rssBytes(t, "VmRSS")
	var wg sync.WaitGroup
	statuses := make([]int, 6)
	for i := range statuses {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/traces", bytes.NewReader(gz.Bytes()))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Content-Encoding", "gzip")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				statuses[i] = resp.StatusCode
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	peak := rssBytes(t, "VmHWM")
	t.Logf("RSS idle %.1f MiB, peak under six nested requests %.1f MiB (+%.1f MiB)",
		float64(idle)/(1<<20), float64(peak)/(1<<20), float64(peak-idle)/(1<<20))
	for _, s := range statuses {
		require.Equal(t, http.StatusBadRequest, s)
	}
	require.LessOrEqual(t, peak-idle, int64(64<<20))
}
