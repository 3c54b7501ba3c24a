package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// openaiProvider is Chat Completions with function calling (no state kept
// on the server: every turn sends the whole conversation).
type openaiProvider struct {
	client
	chat openai.ChatCompletionService
}

var _ Provider = (*openaiProvider)(nil)

func newOpenAI(cfg Config) *openaiProvider {
	// The service is built from these options alone: openai.NewClient
	// would first apply DefaultClientOptions, which read OPENAI_* variables
	// (organization, project, custom headers) whatever is passed after.
	return &openaiProvider{
		client: client{name: OpenAI, model: cfg.Model, key: secret(cfg.APIKey)},
		chat: openai.NewChatCompletionService(
			option.WithBaseURL(cfg.BaseURL),
			option.WithAPIKey(cfg.APIKey),
			option.WithHTTPClient(cfg.HTTPClient),
			option.WithMaxRetries(0), // Temporal retries the turn
			option.WithRequestTimeout(cfg.Timeout),
		),
	}
}

// Complete makes one chat completion.
func (p *openaiProvider) Complete(ctx context.Context, req Request) (Response, error) {
	params, err := p.params(req)
	if err != nil {
		return Response{}, err
	}
	cc, err := p.chat.New(ctx, params)
	if err != nil {
		return Response{}, p.wrap(err)
	}
	if len(cc.Choices) == 0 {
		return Response{}, Malformed(OpenAI, "completion %q has no choices", cc.ID)
	}
	ch := cc.Choices[0]
	resp := Response{ID: cc.ID, Model: cc.Model, Text: ch.Message.Content, RawStop: ch.FinishReason,
		Usage: Usage{InputTokens: cc.Usage.PromptTokens, OutputTokens: cc.Usage.CompletionTokens}}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "function" {
			return Response{}, Malformed(OpenAI, "tool call %q of type %q", tc.ID, tc.Type)
		}
		if tc.ID == "" || tc.Function.Name == "" {
			return Response{}, Malformed(OpenAI, "tool call without id or function name")
		}
		args, err := objectArgs([]byte(tc.Function.Arguments))
		if err != nil {
			return Response{}, Malformed(OpenAI, "tool call %q (%s): %v", tc.Function.Name, tc.ID, err)
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args})
	}
	switch ch.FinishReason {
	case "stop":
		resp.Stop = StopEnd
	case "tool_calls", "function_call":
		resp.Stop = StopToolUse
	case "length":
		resp.Stop = StopMaxTokens
	case "content_filter":
		resp.Stop = StopRefusal
	case "":
		return Response{}, Malformed(OpenAI, "completion %q has no finish_reason", cc.ID)
	default:
		resp.Stop = StopOther
	}
	if ch.Message.Refusal != "" {
		resp.Stop = StopRefusal
		if resp.Text == "" {
			resp.Text = ch.Message.Refusal
		}
	}
	if req.Response != nil && resp.Stop == StopEnd && !json.Valid([]byte(resp.Text)) {
		return Response{}, Malformed(OpenAI, "structured output is not JSON")
	}
	return resp, nil
}

func (p *openaiProvider) params(req Request) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(p.model)}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, t := range req.Tools {
		schema, err := schemaObject(t.Schema)
		if err != nil {
			return params, &Error{Provider: OpenAI, Kind: KindBadRequest, Message: fmt.Sprintf("tool %q: %v", t.Name, err)}
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if req.Response != nil {
		schema, err := schemaObject(req.Response.Schema)
		if err != nil {
			return params, &Error{Provider: OpenAI, Kind: KindBadRequest, Message: fmt.Sprintf("response schema: %v", err)}
		}
		// Strict: the schema must close its objects (additionalProperties
		// false) and require every property, as judge.Schema does.
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name: req.Response.Name, Schema: schema, Strict: openai.Bool(true)}},
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case User:
			for _, r := range m.ToolResults {
				params.Messages = append(params.Messages, openai.ToolMessage(r.Content, r.CallID))
			}
			if m.Text != "" {
				params.Messages = append(params.Messages, openai.UserMessage(m.Text))
			}
			if m.Text == "" && len(m.ToolResults) == 0 {
				return params, &Error{Provider: OpenAI, Kind: KindBadRequest, Message: fmt.Sprintf("message %d is empty", i)}
			}
		case Assistant:
			var a openai.ChatCompletionAssistantMessageParam
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.ToolCalls {
				args := string(c.Args)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args}}})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return params, &Error{Provider: OpenAI, Kind: KindBadRequest, Message: fmt.Sprintf("message %d has role %q", i, m.Role)}
		}
	}
	return params, nil
}

func (p *openaiProvider) wrap(err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) {
		msg := oe.Message
		if oe.Code != "" {
			msg = oe.Code + ": " + msg
		}
		if msg == "" {
			msg = oe.RawJSON()
		}
		e := statusError(OpenAI, p.key, oe.StatusCode, nil, msg)
		if oe.Response != nil {
			e.RetryAfter = retryAfter(oe.Response.Header)
		}
		return e
	}
	return transportError(OpenAI, p.key, err)
}
