package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/verify"
)

// TestDoorBoundsSearchAttributeValues: every value that reaches a search
// attribute or a workflow ID is bounded at the door, and the answer names
// the field and the limit (on HEAD a 3 KB agent was 202, and its start
// then failed for good, forever).
func TestDoorBoundsSearchAttributeValues(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("door-bounds")
	e.contract(key, payoutContract)
	base := func() map[string]any {
		return map[string]any{"contract": "send_payout", "agent": "agent-1", "subject": "account:acc_1",
			"params": map[string]any{"amount": 2500}}
	}
	for _, tc := range []struct{ field, value, want string }{
		{"agent", strings.Repeat("a", 3000), "agent: is longer than 256 bytes"},
		{"agent", strings.Repeat("a", 100<<10), "agent: is longer than 256 bytes"},
		{"contract", strings.Repeat("c", 3000), "contract: is longer than 128 bytes"},
		{"subject", "account:" + strings.Repeat("x", 3000), "longer than 256 bytes"},
		{"id", strings.Repeat("i", 200), "id: is longer than 128 bytes"},
	} {
		b := base()
		b[tc.field] = tc.value
		res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: b})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", tc.field, res.Body)
		require.Contains(t, res.ErrMessage(t), tc.want)
		require.Less(t, len(res.Body), 600, "the answer does not echo the value")
	}
	require.Empty(t, e.ver.startCalls(), "nothing reached Temporal")
	b := base()
	b["agent"] = strings.Repeat("a", 256)
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: b})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
}

// TestRequestLogNamesTenant: each request line names the tenant auth found
// and the request id (on HEAD the line read the context before auth set
// it: tenant="" on every line).
func TestRequestLogNamesTenant(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("logs")
	res := e.do(apitest.Request{Method: "GET", Path: "/v1/contracts", Key: key, Header: map[string]string{"X-Request-Id": "req-logs-1"}})
	require.Equal(t, http.StatusOK, res.Status)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{"contract": "nope"},
		Header: map[string]string{"X-Request-Id": "req-logs-2"}})
	require.Equal(t, http.StatusBadRequest, res.Status)
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/contracts", Key: "cl_wrong", Header: map[string]string{"X-Request-Id": "req-logs-3"}})
	require.Equal(t, http.StatusUnauthorized, res.Status)

	seen := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(e.logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		if line["msg"] != "http request" {
			continue
		}
		id, _ := line["request_id"].(string)
		require.NotEmpty(t, id, "every request line names its request id: %s", sc.Text())
		tenant, ok := line["tenant"].(string)
		require.True(t, ok, "every request line has a tenant field: %s", sc.Text())
		seen[id] = tenant
	}
	require.Equal(t, tid, seen["req-logs-1"])
	require.Equal(t, tid, seen["req-logs-2"], "a refused request names its tenant too")
	require.Equal(t, "", seen["req-logs-3"], "no tenant: the key was wrong")
}

// TestDoorRefusesNonsense: the values the probe found accepted (or refused
// without naming the field) are refused, naming the field.
func TestDoorRefusesNonsense(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("door-nonsense")
	e.contract(key, payoutContract)
	action := func(mod func(map[string]any)) apitest.Response {
		b := map[string]any{"contract": "send_payout", "agent": "agent-1", "subject": "account:acc_1",
			"params": map[string]any{"amount": 2500}, "claim": map[string]any{"status": "success"}}
		mod(b)
		return e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: b})
	}
	for _, tc := range []struct {
		name string
		mod  func(map[string]any)
		want string
	}{
		{"requested_at a year ahead", func(b map[string]any) {
			b["requested_at"] = e.now.AddDate(1, 0, 0).Format(time.RFC3339)
		}, "requested_at: "},
		{"requested_at year 9999", func(b map[string]any) { b["requested_at"] = "9999-12-31T23:59:59Z" }, "requested_at: "},
		{"requested_at year 1", func(b map[string]any) { b["requested_at"] = "0001-01-01T00:00:00Z" }, "requested_at: must be 1970"},
		{"claim.status banana", func(b map[string]any) { b["claim"] = map[string]any{"status": "banana"} }, "claim.status: \"banana\" is not one of success, failure, partial, unknown"},
	} {
		res := action(tc.mod)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", tc.name, res.Body)
		require.Contains(t, res.ErrMessage(t), tc.want, tc.name)
	}
	for _, status := range []string{"success", "failure", "partial", "unknown", ""} {
		res := action(func(b map[string]any) { b["claim"] = map[string]any{"status": status} })
		require.Equal(t, http.StatusAccepted, res.Status, "claim.status %q: %s", status, res.Body)
	}
	res := action(func(b map[string]any) { b["requested_at"] = e.now.Add(time.Hour).Format(time.RFC3339) })
	require.Equal(t, http.StatusAccepted, res.Status, "within the skew: %s", res.Body)

	fact := func(at string) apitest.Response {
		return e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{map[string]any{
			"source": "ledger", "type": "payout_sent", "subject": "account:acc_1", "external_id": "x-" + at, "occurred_at": at,
		}}}})
	}
	for _, at := range []string{"0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		res := fact(at)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", at, res.Body)
		require.Contains(t, res.ErrMessage(t), "facts[0].occurred_at: ", at)
	}
}

// TestNumbersBeyondInt64Refused: params and attrs holding an integer that
// does not fit int64 (or a non-integer beyond 2^53) are refused naming the
// field, never rounded; 2^63−1 is kept exact end to end. On HEAD
// 18446744073709551616 was stored as 18446744073709552000.
func TestNumbersBeyondInt64Refused(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("numbers")
	e.contract(key, payoutContract)
	action := func(amount string) apitest.Response {
		return e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key,
			Body: `{"contract":"send_payout","agent":"a","subject":"account:acc_1","params":{"amount":` + amount + `}}`})
	}
	fact := func(i int, amount string) apitest.Response {
		return e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: `{"facts":[{"source":"ledger","type":"payout_sent",` +
			`"subject":"account:acc_1","external_id":"n-` + strconv.Itoa(i) + `","occurred_at":"2026-11-01T10:00:00Z","attrs":{"amount":` + amount + `}}]}`})
	}
	for i, n := range []string{"9223372036854775808", "18446744073709551616", "18446744073709551617", "-9223372036854775809",
		"123456789012345678901234567890", "1e19", "9007199254740993.5"} {
		res := action(n)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", n, res.Body)
		require.Contains(t, res.ErrMessage(t), "params.amount: ", n)
		res = fact(i, n)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", n, res.Body)
		require.Contains(t, res.ErrMessage(t), "facts[0].attrs.amount: ", n)
	}
	res := action("9223372036854775807")
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	id := res.JSON(t)["id"].(string)
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/" + id, Key: key})
	require.Contains(t, string(res.Body), `"amount":9223372036854775807`, "kept exact end to end")
	res = fact(99, "9223372036854775807")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}

// hungFrontend answers the SDK's handshake (GetSystemInfo) and then takes
// every call and never answers it: a Temporal frontend gone away after the
// client connected (hung, overloaded, partitioned), where each call waits
// for its deadline.
type hungFrontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
}

func (hungFrontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{}, nil
}

func (hungFrontend) DescribeWorkflowExecution(ctx context.Context, _ *workflowservice.DescribeWorkflowExecutionRequest) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungFrontend) UpdateWorkflowExecution(ctx context.Context, _ *workflowservice.UpdateWorkflowExecutionRequest) (*workflowservice.UpdateWorkflowExecutionResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungFrontend) StartWorkflowExecution(ctx context.Context, _ *workflowservice.StartWorkflowExecutionRequest) (*workflowservice.StartWorkflowExecutionResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungFrontend) ExecuteMultiOperation(ctx context.Context, _ *workflowservice.ExecuteMultiOperationRequest) (*workflowservice.ExecuteMultiOperationResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func hungTemporal(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		<-stream.Context().Done() // the health service too
		return stream.Context().Err()
	}))
	workflowservice.RegisterWorkflowServiceServer(srv, hungFrontend{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestRecheckAnswersWhenTemporalIsAway: with a verifier whose Temporal
// does not answer (a gRPC server that takes calls and never answers), a
// recheck answers 503 with Retry-After within the probe's 2 s instead of
// waiting for the 60 s recheck timeout; a GET with wait answers its stored
// state the same way. The client here gives up after 15 s: on HEAD the
// recheck held the request for the whole timeout (checked: it fails with
// the probe removed).
func TestRecheckAnswersWhenTemporalIsAway(t *testing.T) {
	dead, err := client.NewLazyClient(client.Options{HostPort: hungTemporal(t)})
	require.NoError(t, err)
	defer dead.Close()
	vc := &verify.Client{Temporal: dead}
	e := newEnv(t, withVerifier(vc))
	_, key := e.tenant("away")
	e.contract(key, payoutContract)
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "send_payout", "agent": "agent-1", "subject": "account:acc_1", "params": map[string]any{"amount": 1}}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "pending", res.JSON(t)["verification"])
	id := res.JSON(t)["id"].(string)

	srv := httptest.NewServer(e.srv.Handler())
	defer srv.Close()
	hc := &http.Client{Timeout: 15 * time.Second}
	send := func(method, path string) *http.Response {
		r, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		r.Header.Set("Authorization", "Bearer "+key)
		began := time.Now()
		resp, err := hc.Do(r)
		require.NoError(t, err, "the API must answer before the client gives up")
		t.Logf("%s %s answered %d in %s", method, path, resp.StatusCode, time.Since(began).Round(time.Millisecond))
		return resp
	}
	resp := send("POST", "/v1/actions/"+id+"/recheck")
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	resp = send("GET", "/v1/actions/"+id+"?wait=final&timeout=30")
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the stored state answers")
}

// TestInvalidTextRefusedNamingTheField: invalid UTF-8 and unpaired
// surrogate escapes are refused naming the field, not replaced by U+FFFD
// (HEAD stored them replaced, silently).
func TestInvalidTextRefusedNamingTheField(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("utf8")
	e.contract(key, payoutContract)
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/v1/actions", "{\"contract\":\"send_payout\",\"agent\":\"a\xff\",\"subject\":\"account:acc_1\"}", "agent: invalid UTF-8"},
		{"/v1/actions", `{"contract":"send_payout","agent":"a","subject":"account:acc_1","claim":{"status":"success","message":"x\ud800y"}}`, "claim.message: invalid surrogate pair"},
		{"/v1/actions", `{"contract":"send_payout","agent":"a","subject":"account:acc_1","params":{"note":"\udc00"}}`, "params.note: invalid surrogate pair"},
		{"/v1/actions", "{\"contract\":\"send_payout\",\"agent\":\"a\",\"subject\":\"account:acc_1\",\"params\":{\"n\xc3\":1}}", "params: invalid UTF-8"},
		{"/v1/facts", "{\"facts\":[{\"source\":\"ledger\",\"type\":\"t\",\"subject\":\"account:acc_1\",\"external_id\":\"x\",\"occurred_at\":\"2026-11-01T10:00:00Z\",\"attrs\":{\"memo\":[\"ok\",\"bad\xed\xa0\x80\"]}}]}", "facts[0].attrs.memo[1]: invalid UTF-8"},
		{"/v1/connectors", "{\"source\":\"s\xfe\",\"kind\":\"http_events\",\"url\":\"http://x.example/\"}", "source: invalid UTF-8"},
	} {
		res := e.do(apitest.Request{Method: "POST", Path: tc.path, Key: key, Body: []byte(tc.body)})
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", tc.want, res.Body)
		require.Equal(t, tc.want, res.ErrMessage(t)[:len(tc.want)], "%s", res.Body)
	}
	// A surrogate pair is text (U+1F600), and so is any valid UTF-8.
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key,
		Body: `{"contract":"send_payout","agent":"a\ud83d\ude00 é","subject":"account:acc_1","params":{"amount":1}}`})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
}
