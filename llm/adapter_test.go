package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
)

var providers = []string{llm.Anthropic, llm.OpenAI, llm.Google}

var testTools = []llm.Tool{
	{Name: "get_order", Description: "read an order",
		Schema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)},
	{Name: "refund", Description: "refund an order",
		Schema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"integer"},"idempotency_key":{"type":"string"}},"required":["order_id","amount"]}`)},
}

// start runs a fake for provider and builds its adapter.
func start(t *testing.T, provider string, p fake.Policy, opts ...fake.Option) (*fake.Server, llm.Provider) {
	t.Helper()
	srv, err := fake.Start(provider, p, opts...)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	prov, err := llm.New(srv.Config())
	require.NoError(t, err)
	return srv, prov
}

// twoTurns calls get_order, then answers with what it saw in the result.
var twoTurns = fake.PolicyFunc(func(t fake.Turn) (fake.Reply, error) {
	last := t.Messages[len(t.Messages)-1]
	if len(last.ToolResults) == 0 {
		return fake.Reply{Text: "Let me look.", Calls: []fake.Call{{Name: "get_order", Args: json.RawMessage(`{"order_id":"o_1"}`)}}}, nil
	}
	r := last.ToolResults[0]
	o, ok := llm.ParseToolOutcome(r.Content)
	return fake.Reply{Text: fmt.Sprintf("result of %s: parsed=%v status=%d error=%v body=%s", r.Name, ok, o.Status, r.IsError, o.Body)}, nil
})

func firstRequest() llm.Request {
	return llm.Request{System: "You are a support agent.", MaxTokens: 256, Tools: testTools,
		Messages: []llm.Message{{Role: llm.User, Text: "Look at order o_1."}}}
}

func TestAdapterToolCallRoundTrip(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			srv, prov := start(t, p, twoTurns)
			ctx := context.Background()
			req := firstRequest()
			resp, err := prov.Complete(ctx, req)
			require.NoError(t, err)
			require.Equal(t, llm.StopToolUse, resp.Stop)
			require.Len(t, resp.ToolCalls, 1)
			call := resp.ToolCalls[0]
			require.Equal(t, "get_order", call.Name)
			require.JSONEq(t, `{"order_id":"o_1"}`, string(call.Args))
			require.NotEmpty(t, call.ID)
			require.Equal(t, "Let me look.", resp.Text)
			require.Positive(t, resp.Usage.InputTokens)
			require.Positive(t, resp.Usage.OutputTokens)
			require.Equal(t, "fake-"+p, resp.Model)
			require.NotEmpty(t, resp.ID)

			// The fake decoded the tools and the system prompt from the wire.
			seen := srv.Requests()[0].Turn
			require.Equal(t, "You are a support agent.", seen.System)
			require.Len(t, seen.Tools, 2)
			require.Equal(t, "refund", seen.Tools[1].Name)
			require.Contains(t, string(seen.Tools[1].Schema), "idempotency_key")
			require.Equal(t, 256, seen.MaxTokens)

			out := llm.ToolOutcome{Status: 200, Body: `{"id":"o_1","status":"paid"}`}
			req.Messages = append(req.Messages, resp.Message(), llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{out.Result(call)}})
			resp2, err := prov.Complete(ctx, req)
			require.NoError(t, err)
			require.Equal(t, llm.StopEnd, resp2.Stop)
			require.Empty(t, resp2.ToolCalls)
			require.Contains(t, resp2.Text, "result of get_order: parsed=true status=200 error=false")
			require.Contains(t, resp2.Text, `"status":"paid"`)
		})
	}
}

func TestAdapterToolErrorResult(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			_, prov := start(t, p, twoTurns)
			ctx := context.Background()
			req := firstRequest()
			resp, err := prov.Complete(ctx, req)
			require.NoError(t, err)
			call := resp.ToolCalls[0]
			out := llm.ToolOutcome{Status: 503, Body: `{"error":{"code":"unavailable","message":"try later"}}`}
			req.Messages = append(req.Messages, resp.Message(), llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{out.Result(call)}})
			resp2, err := prov.Complete(ctx, req)
			require.NoError(t, err)
			require.Contains(t, resp2.Text, "parsed=true status=503")
			if p != llm.OpenAI { // Chat Completions has no error flag; the status says it
				require.Contains(t, resp2.Text, "error=true")
			}
			require.Contains(t, resp2.Text, "try later")

			// A timeout: no status, an error.
			req.Messages[len(req.Messages)-1] = llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{
				llm.ToolOutcome{Error: "timeout: context deadline exceeded"}.Result(call)}}
			resp3, err := prov.Complete(ctx, req)
			require.NoError(t, err)
			require.Contains(t, resp3.Text, "parsed=true status=0")
		})
	}
}

func TestAdapterMalformedOutput(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			srv, prov := start(t, p, twoTurns)
			srv.Inject(fake.Fault{Malformed: true})
			_, err := prov.Complete(context.Background(), firstRequest())
			require.Error(t, err)
			e, ok := llm.AsError(err)
			require.True(t, ok, "%T %v", err, err)
			require.Equal(t, llm.KindMalformed, e.Kind, e.Error())
			require.False(t, e.Retryable())
			t.Log(err)
			require.Contains(t, err.Error(), p+": malformed")
			require.False(t, retryable(err))
		})
	}
}

func TestAdapterRetryableThenSuccess(t *testing.T) {
	cases := []struct {
		fault fake.Fault
		kind  llm.ErrorKind
		after time.Duration
	}{
		{fake.Fault{Status: 429, RetryAfter: 2 * time.Second}, llm.KindRateLimited, 2 * time.Second},
		{fake.Fault{Status: 500}, llm.KindServer, 0},
		{fake.Fault{Status: 503}, llm.KindServer, 0},
	}
	for _, p := range providers {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d", p, c.fault.Status), func(t *testing.T) {
				srv, prov := start(t, p, twoTurns)
				srv.Inject(c.fault)
				ctx := context.Background()
				_, err := prov.Complete(ctx, firstRequest())
				e, ok := llm.AsError(err)
				require.True(t, ok, "%T %v", err, err)
				require.Equal(t, c.kind, e.Kind, e.Error())
				require.Equal(t, c.fault.Status, e.Status)
				require.True(t, e.Retryable())
				require.Equal(t, c.after, e.RetryAfter)
				require.Len(t, srv.Requests(), 1, "the SDK must not retry on its own")
				t.Log(err)

				// The caller (Temporal) retries: the next attempt succeeds.
				resp, err := prov.Complete(ctx, firstRequest())
				require.NoError(t, err)
				require.Len(t, resp.ToolCalls, 1)
				require.Len(t, srv.Requests(), 2)
			})
		}
	}
}

func TestAdapterBadKey(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			srv, _ := start(t, p, twoTurns)
			cfg := srv.Config()
			cfg.APIKey = "wrong-key-0123456789"
			prov, err := llm.New(cfg)
			require.NoError(t, err)
			_, err = prov.Complete(context.Background(), firstRequest())
			e, ok := llm.AsError(err)
			require.True(t, ok, "%T %v", err, err)
			require.Equal(t, llm.KindAuth, e.Kind, e.Error())
			require.False(t, e.Retryable())
			if p == llm.Google {
				require.Equal(t, 400, e.Status) // Gemini's answer to a bad key
			} else {
				require.Equal(t, 401, e.Status)
			}
			require.NotContains(t, err.Error(), cfg.APIKey)
			require.NotContains(t, err.Error(), srv.Key())
			t.Log(err)
		})
	}
}

func TestAdapterStructuredOutput(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"verdict":{"type":"string"}},"required":["verdict"]}`)
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			answer := `{"verdict":"PASS"}`
			srv, prov := start(t, p, fake.PolicyFunc(func(t fake.Turn) (fake.Reply, error) {
				if t.Response == nil {
					return fake.Reply{}, fmt.Errorf("no response schema on the wire")
				}
				return fake.Reply{Text: answer}, nil
			}))
			zero := 0.0
			req := llm.Request{MaxTokens: 64, Temperature: &zero, Response: &llm.ResponseSchema{Name: "verdict", Schema: schema},
				Messages: []llm.Message{{Role: llm.User, Text: "judge"}}}
			resp, err := prov.Complete(context.Background(), req)
			require.NoError(t, err)
			require.JSONEq(t, answer, resp.Text)
			require.JSONEq(t, string(schema), string(srv.Requests()[0].Turn.Response.Schema))

			answer = "PASS, I think"
			_, err = prov.Complete(context.Background(), req)
			e, ok := llm.AsError(err)
			require.True(t, ok)
			require.Equal(t, llm.KindMalformed, e.Kind)
		})
	}
}

func TestAdapterBadRequestIsNotRetryable(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			_, prov := start(t, p, twoTurns)
			// A tool result that answers no call: every API refuses it.
			req := firstRequest()
			req.Messages = append(req.Messages, llm.Message{Role: llm.Assistant, Text: "ok"},
				llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{{CallID: "nope", Name: "nope", Content: "{}"}}})
			_, err := prov.Complete(context.Background(), req)
			e, ok := llm.AsError(err)
			require.True(t, ok, "%T %v", err, err)
			require.Equal(t, llm.KindBadRequest, e.Kind, e.Error())
			require.Equal(t, 400, e.Status)
			require.False(t, e.Retryable())
		})
	}
}

func TestAdapterTimeoutIsRetryable(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			block := make(chan struct{})
			srv, err := fake.Start(p, fake.PolicyFunc(func(fake.Turn) (fake.Reply, error) {
				<-block
				return fake.Reply{Text: "late"}, nil
			}))
			require.NoError(t, err)
			t.Cleanup(srv.Close)               // runs second: no handler is blocked any more
			t.Cleanup(func() { close(block) }) // runs first
			cfg := srv.Config()
			cfg.Timeout = 200 * time.Millisecond
			prov, err := llm.New(cfg)
			require.NoError(t, err)
			_, err = prov.Complete(context.Background(), firstRequest())
			e, ok := llm.AsError(err)
			require.True(t, ok, "%T %v", err, err)
			require.Equal(t, llm.KindTimeout, e.Kind, e.Error())
			require.True(t, e.Retryable())
		})
	}
}

func TestAdapterConnectionRefusedIsRetryable(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			srv, err := fake.Start(p, twoTurns)
			require.NoError(t, err)
			cfg := srv.Config()
			srv.Close()
			prov, err := llm.New(cfg)
			require.NoError(t, err)
			_, err = prov.Complete(context.Background(), firstRequest())
			e, ok := llm.AsError(err)
			require.True(t, ok, "%T %v", err, err)
			require.Equal(t, llm.KindConnection, e.Kind, e.Error())
			require.True(t, e.Retryable())
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := llm.New(llm.Config{Provider: "mistral", APIKey: "k"})
	require.ErrorContains(t, err, `unknown provider "mistral"`)
	_, err = llm.New(llm.Config{Provider: llm.OpenAI})
	require.ErrorContains(t, err, "no API key")
	_, err = llm.FromEnv("nope", "")
	require.ErrorContains(t, err, `unknown provider "nope"`)
}

// TestFromEnvReadsOnlyTheNamedProvider: FromEnv takes the named provider's
// key (and base URL) from the environment, and the adapters built with
// explicit configuration ignore every provider variable.
func TestFromEnvReadsOnlyTheNamedProvider(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			srv, err := fake.Start(p, twoTurns, fake.Option{Key: "env-key-" + p + "-abcdefgh"})
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			// Poison every provider's variables…
			for _, v := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"} {
				t.Setenv(v, "poison-key")
			}
			for _, v := range []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"} {
				t.Setenv(v, "http://127.0.0.1:1/")
			}
			t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "x-api-key: poison-key")
			t.Setenv("OPENAI_CUSTOM_HEADERS", "Authorization: Bearer poison-key")
			t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
			// …an explicit configuration is not affected by them,
			prov, err := llm.New(srv.Config())
			require.NoError(t, err)
			_, err = prov.Complete(context.Background(), firstRequest())
			require.NoError(t, err)
			// …and FromEnv reads the named provider's own.
			_, err = llm.FromEnv(p, "")
			require.NoError(t, err)
			t.Setenv(llm.KeyEnv[p], srv.Key())
			t.Setenv(llm.BaseURLEnv[p], srv.BaseURL())
			prov, err = llm.FromEnv(p, "fake-model")
			require.NoError(t, err)
			require.Equal(t, "fake-model", prov.Model())
			resp, err := prov.Complete(context.Background(), firstRequest())
			require.NoError(t, err)
			require.Len(t, resp.ToolCalls, 1)
			t.Setenv(llm.KeyEnv[p], "")
			_, err = llm.FromEnv(p, "")
			require.ErrorContains(t, err, llm.KeyEnv[p]+" is not set")
		})
	}
}

func TestErrorStringNamesProviderKindAndStatus(t *testing.T) {
	e := &llm.Error{Provider: "openai", Kind: llm.KindRateLimited, Status: 429, Message: "slow down"}
	require.Equal(t, "openai: rate_limited (HTTP 429): slow down", e.Error())
	require.True(t, strings.HasPrefix(fmt.Sprintf("%v", fmt.Errorf("turn: %w", e)), "turn: openai"))
}

// retryable reports whether err is an *llm.Error worth retrying.
func retryable(err error) bool {
	e, ok := llm.AsError(err)
	return ok && e.Retryable()
}
