package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicProvider is the Messages API with tools.
type anthropicProvider struct {
	client
	sdk anthropic.Client
}

var _ Provider = (*anthropicProvider)(nil)

func newAnthropic(cfg Config) *anthropicProvider {
	return &anthropicProvider{
		client: client{name: Anthropic, model: cfg.Model, key: secret(cfg.APIKey)},
		sdk: anthropic.NewClient(
			option.WithoutEnvironmentDefaults(), // no ANTHROPIC_* variables, no profile on disk
			option.WithBaseURL(cfg.BaseURL),
			option.WithAPIKey(cfg.APIKey),
			option.WithHTTPClient(cfg.HTTPClient),
			option.WithMaxRetries(0), // Temporal retries the turn
			option.WithRequestTimeout(cfg.Timeout),
		),
	}
}

// Complete makes one Messages call.
func (p *anthropicProvider) Complete(ctx context.Context, req Request) (Response, error) {
	params, err := p.params(req)
	if err != nil {
		return Response{}, err
	}
	msg, err := p.sdk.Messages.New(ctx, params)
	if err != nil {
		return Response{}, p.wrap(err)
	}
	resp := Response{ID: msg.ID, Model: string(msg.Model), RawStop: string(msg.StopReason),
		Usage: Usage{InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens}}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			resp.Text += b.Text
		case "tool_use":
			args, err := objectArgs(b.Input)
			if err != nil {
				return Response{}, Malformed(Anthropic, "tool_use %q (%s): %v", b.Name, b.ID, err)
			}
			if b.ID == "" || b.Name == "" {
				return Response{}, Malformed(Anthropic, "tool_use block without id or name")
			}
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	switch msg.StopReason {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		resp.Stop = StopEnd
	case anthropic.StopReasonToolUse:
		resp.Stop = StopToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		resp.Stop = StopMaxTokens
	case anthropic.StopReasonRefusal:
		resp.Stop = StopRefusal
	case "":
		return Response{}, Malformed(Anthropic, "message %q has no stop_reason", msg.ID)
	default:
		resp.Stop = StopOther
	}
	if req.Response != nil && len(resp.ToolCalls) == 0 && !json.Valid([]byte(resp.Text)) && resp.Stop == StopEnd {
		return Response{}, Malformed(Anthropic, "structured output is not JSON")
	}
	return resp, nil
}

func (p *anthropicProvider) params(req Request) (anthropic.MessageNewParams, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(p.model),
		MaxTokens: int64(req.MaxTokens),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema, err := schemaObject(t.Schema)
		if err != nil {
			return params, &Error{Provider: Anthropic, Kind: KindBadRequest, Message: fmt.Sprintf("tool %q: %v", t.Name, err)}
		}
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if required, ok := schema["required"].([]any); ok {
			for _, r := range required {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "properties" && k != "required" && k != "type" {
				in.ExtraFields[k] = v
			}
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	if req.Response != nil {
		schema, err := schemaObject(req.Response.Schema)
		if err != nil {
			return params, &Error{Provider: Anthropic, Kind: KindBadRequest, Message: fmt.Sprintf("response schema: %v", err)}
		}
		params.OutputConfig = anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schema}}
	}
	for i, m := range req.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		for _, r := range m.ToolResults {
			blocks = append(blocks, anthropic.NewToolResultBlock(r.CallID, r.Content, r.IsError))
		}
		if m.Text != "" {
			blocks = append(blocks, anthropic.NewTextBlock(m.Text))
		}
		for _, c := range m.ToolCalls {
			var input any = json.RawMessage(c.Args)
			if len(c.Args) == 0 {
				input = map[string]any{}
			}
			blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, input, c.Name))
		}
		if len(blocks) == 0 {
			return params, &Error{Provider: Anthropic, Kind: KindBadRequest, Message: fmt.Sprintf("message %d is empty", i)}
		}
		switch m.Role {
		case User:
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		case Assistant:
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		default:
			return params, &Error{Provider: Anthropic, Kind: KindBadRequest, Message: fmt.Sprintf("message %d has role %q", i, m.Role)}
		}
	}
	return params, nil
}

func (p *anthropicProvider) wrap(err error) error {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		msg := ae.Message
		if t := ae.Type(); t != "" {
			msg = string(t) + ": " + msg
		}
		if msg == "" {
			msg = ae.RawJSON()
		}
		var h = ae.Response
		e := statusError(Anthropic, p.key, ae.StatusCode, nil, msg)
		if h != nil {
			e.RetryAfter = retryAfter(h.Header)
		}
		if ae.StatusCode == 529 { // overloaded
			e.Kind = KindServer
		}
		return e
	}
	return transportError(Anthropic, p.key, err)
}

// objectArgs checks that raw is a JSON object and returns it compacted.
func objectArgs(raw []byte) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("arguments are not a JSON object: %.80q", string(raw))
	}
	return json.RawMessage(raw), nil
}

// schemaObject decodes a JSON Schema object.
func schemaObject(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("schema is not a JSON object")
	}
	return m, nil
}
