package fake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
)

var tools = []llm.Tool{
	{Name: "refund", Schema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"idempotency_key":{"type":"string"}}}`)},
	{Name: "add_note", Schema: json.RawMessage(`{"type":"object","properties":{"body":{"type":"string"}}}`)},
	{Name: "report_result", Schema: json.RawMessage(`{"type":"object"}`)},
}

var plan = fake.Plan{Steps: []fake.Step{
	{Tool: "refund", Args: map[string]any{"order_id": "o_1"}},
	{Tool: "add_note", Args: map[string]any{"body": "done"}},
}}

func turn(msgs ...llm.Message) fake.Turn {
	return fake.Turn{Tools: tools, Messages: append([]llm.Message{{Role: llm.User, Text: "Refund o_1.\n" + plan.Text()}}, msgs...)}
}

func args(t *testing.T, c fake.Call) map[string]any {
	var m map[string]any
	require.NoError(t, json.Unmarshal(c.Args, &m))
	return m
}

func TestModelKeysOnlyWhereTheSchemaTakesOne(t *testing.T) {
	m := fake.NewModel(fake.Careful)
	r, err := m.Reply(turn())
	require.NoError(t, err)
	require.Equal(t, "refund", r.Calls[0].Name)
	key := args(t, r.Calls[0])["idempotency_key"]
	require.NotEmpty(t, key)

	// Deterministic: the same turn gets the same answer, and a retry the same key.
	again, err := m.Reply(turn())
	require.NoError(t, err)
	require.Equal(t, r, again)
	first := llm.ToolCall{ID: "1", Name: "refund", Args: r.Calls[0].Args}
	retry, err := m.Reply(turn(llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{first}},
		llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{llm.ToolOutcome{Status: 502}.Result(first)}}))
	require.NoError(t, err)
	require.Equal(t, "refund", retry.Calls[0].Name)
	require.Equal(t, key, args(t, retry.Calls[0])["idempotency_key"])

	// add_note declares no key: none is sent.
	next, err := m.Reply(turn(llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{first}},
		llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{llm.ToolOutcome{Status: 201, Body: "{}"}.Result(first)}}))
	require.NoError(t, err)
	require.Equal(t, "add_note", next.Calls[0].Name)
	require.NotContains(t, args(t, next.Calls[0]), "idempotency_key")

	// A model that does not use keys sends none.
	r, err = fake.NewModel(fake.RetriesWithoutKey).Reply(turn())
	require.NoError(t, err)
	require.NotContains(t, args(t, r.Calls[0]), "idempotency_key")
}

func TestModelWithoutPlanReportsFailure(t *testing.T) {
	r, err := fake.NewModel(fake.Careful).Reply(fake.Turn{Tools: tools, Messages: []llm.Message{{Role: llm.User, Text: "Do something."}}})
	require.NoError(t, err)
	require.Equal(t, "report_result", r.Calls[0].Name)
	require.Equal(t, "failure", args(t, r.Calls[0])["claimed"])
}

func TestModelReadsErrorFlagWithoutOutcomeFormat(t *testing.T) {
	first := llm.ToolCall{ID: "1", Name: "refund", Args: json.RawMessage(`{"order_id":"o_1"}`)}
	r, err := fake.NewModel(fake.Temperament{}).Reply(turn(llm.Message{Role: llm.Assistant, ToolCalls: []llm.ToolCall{first}},
		llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{{CallID: "1", Name: "refund", Content: "forbidden", IsError: true}}}))
	require.NoError(t, err)
	require.Equal(t, "failure", args(t, r.Calls[0])["claimed"])
	require.Contains(t, args(t, r.Calls[0])["message"], "forbidden")
}

// post sends a raw request to a fake.
func post(t *testing.T, url string, headers map[string]string, body string) (int, string, string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestFakesRefuseWrongShapes(t *testing.T) {
	model := fake.NewModel(fake.Careful)
	cases := []struct {
		provider, path string
		headers        map[string]string
		body           string
		status         int
		want           string
	}{
		{llm.Anthropic, "v1/messages", map[string]string{"x-api-key": "fake-key-anthropic", "anthropic-version": "2026-10-21"},
			`{"model":"m","max_tokens":10,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`, 400, "temperature: Extra inputs are not permitted"},
		{llm.Anthropic, "v1/messages", map[string]string{"x-api-key": "fake-key-anthropic"},
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 400, "anthropic-version"},
		{llm.Anthropic, "v1/messages", map[string]string{"x-api-key": "fake-key-anthropic", "anthropic-version": "2026-10-21"},
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"refund","input":{}}]},{"role":"user","content":"next"}]}`,
			400, "without `tool_result` blocks"},
		{llm.Anthropic, "v1/messages", map[string]string{"x-api-key": "nope", "anthropic-version": "2026-10-21"},
			`{}`, 401, `"authentication_error"`},
		{llm.OpenAI, "v1/chat/completions", map[string]string{"Authorization": "Bearer fake-key-openai"},
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"refund","arguments":"{}"}}]},{"role":"user","content":"next"}]}`,
			400, "must be followed by tool messages"},
		{llm.OpenAI, "v1/chat/completions", map[string]string{"Authorization": "Bearer fake-key-openai"},
			`{"model":"m","messages":[{"role":"tool","tool_call_id":"c9","content":"x"}]}`, 400, "role 'tool'"},
		{llm.OpenAI, "v1/chat/completions", map[string]string{"Authorization": "Bearer nope"}, `{}`, 401, `"invalid_api_key"`},
		{llm.Google, "v1beta/models/m:generateContent", map[string]string{"x-goog-api-key": "fake-key-google"},
			`{"contents":[]}`, 400, "contents is not specified"},
		{llm.Google, "v1beta/models/m:generateContent", map[string]string{"x-goog-api-key": "fake-key-google"},
			`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"refund","response":{}}}]}]}`, 400, "answers no function call"},
		{llm.Google, "v1beta/models/m:generateContent", map[string]string{"x-goog-api-key": "nope"}, `{}`, 400, "API_KEY_INVALID"},
	}
	for _, tc := range cases {
		t.Run(tc.provider+"/"+tc.want, func(t *testing.T) {
			srv, err := fake.Start(tc.provider, model)
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			status, ct, body := post(t, strings.TrimSuffix(srv.BaseURL(), "v1/")+tc.path, tc.headers, tc.body)
			require.Equal(t, tc.status, status, body)
			require.Equal(t, "application/json", ct)
			require.Contains(t, body, tc.want)
			require.NotContains(t, body, "fake-key-")
		})
	}
}

func TestStartRejectsUnknownProvider(t *testing.T) {
	_, err := fake.Start("mistral", fake.NewModel(fake.Careful))
	require.ErrorContains(t, err, `unknown provider "mistral"`)
	_, err = fake.Start(llm.OpenAI, nil)
	require.ErrorContains(t, err, "no policy")
}
