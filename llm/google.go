package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genai"
)

// googleProvider is the Gemini API's generateContent with function
// declarations, on the HTTP backend.
type googleProvider struct {
	client
	sdk *genai.Client
}

var _ Provider = (*googleProvider)(nil)

// localCallID marks a call id the adapter made up because Gemini gave none;
// it is not sent back.
const localCallID = "gemini-local:"

func newGoogle(cfg Config) (*googleProvider, error) {
	one := int32(1)
	timeout := cfg.Timeout
	// Backend, key and base URL are all given, so none of GOOGLE_*/GEMINI_*
	// in the environment is used (the SDK falls back to them only for
	// fields left empty).
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:     cfg.APIKey,
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: cfg.HTTPClient,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:      cfg.BaseURL,
			APIVersion:   "v1beta",
			Timeout:      &timeout,
			RetryOptions: &genai.HTTPRetryOptions{Attempts: &one}, // Temporal retries the turn
		},
	})
	key := secret(cfg.APIKey)
	if err != nil {
		// The SDK's message may print its whole config, key included.
		return nil, &Error{Provider: Google, Kind: KindConfig, Message: key.scrub(err.Error())}
	}
	return &googleProvider{client: client{name: Google, model: cfg.Model, key: key}, sdk: c}, nil
}

// Complete makes one generateContent call.
func (p *googleProvider) Complete(ctx context.Context, req Request) (Response, error) {
	contents, cfg, err := p.params(req)
	if err != nil {
		return Response{}, err
	}
	out, err := p.sdk.Models.GenerateContent(ctx, p.model, contents, cfg)
	if err != nil {
		return Response{}, p.wrap(err)
	}
	resp := Response{ID: out.ResponseID, Model: out.ModelVersion}
	if resp.Model == "" {
		resp.Model = p.model
	}
	if u := out.UsageMetadata; u != nil {
		resp.Usage = Usage{InputTokens: int64(u.PromptTokenCount), OutputTokens: int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount)}
	}
	if len(out.Candidates) == 0 || out.Candidates[0] == nil {
		if out.PromptFeedback != nil && out.PromptFeedback.BlockReason != "" {
			resp.Stop, resp.RawStop = StopRefusal, string(out.PromptFeedback.BlockReason)
			return resp, nil
		}
		return Response{}, Malformed(Google, "response %q has no candidates", out.ResponseID)
	}
	cand := out.Candidates[0]
	resp.RawStop = string(cand.FinishReason)
	if cand.Content != nil {
		for i, part := range cand.Content.Parts {
			switch {
			case part == nil || part.Thought:
			case part.FunctionCall != nil:
				fc := part.FunctionCall
				if fc.Name == "" {
					return Response{}, Malformed(Google, "function call without a name")
				}
				args, err := json.Marshal(fc.Args)
				if err != nil || fc.Args == nil {
					args = []byte("{}")
				}
				id := fc.ID
				if id == "" {
					id = fmt.Sprintf("%s%s/%d", localCallID, out.ResponseID, i)
				}
				resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: id, Name: fc.Name, Args: args, Signature: part.ThoughtSignature})
			case part.Text != "":
				resp.Text += part.Text
			}
		}
	}
	switch cand.FinishReason {
	case genai.FinishReasonStop:
		resp.Stop = StopEnd
		if len(resp.ToolCalls) > 0 {
			resp.Stop = StopToolUse // Gemini says STOP after function calls too
		}
	case genai.FinishReasonMaxTokens:
		resp.Stop = StopMaxTokens
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonBlocklist,
		genai.FinishReasonProhibitedContent, genai.FinishReasonSPII:
		resp.Stop = StopRefusal
	case genai.FinishReasonMalformedFunctionCall, genai.FinishReasonUnexpectedToolCall:
		return Response{}, Malformed(Google, "the model's function call could not be used (finish reason %s) %s", cand.FinishReason, cand.FinishMessage)
	case "", genai.FinishReasonUnspecified:
		return Response{}, Malformed(Google, "response %q has no finish reason", out.ResponseID)
	default:
		resp.Stop = StopOther
	}
	if req.Response != nil && resp.Stop == StopEnd && !json.Valid([]byte(resp.Text)) {
		return Response{}, Malformed(Google, "structured output is not JSON")
	}
	return resp, nil
}

func (p *googleProvider) params(req Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	off := false
	cfg := &genai.GenerateContentConfig{AutomaticContinuation: &off} // one turn, one request, one bill
	if req.MaxTokens > 0 {
		cfg.MaxOutputTokens = int32(req.MaxTokens)
	}
	if req.Temperature != nil {
		t := float32(*req.Temperature)
		cfg.Temperature = &t
	}
	if req.System != "" {
		cfg.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: req.System}}}
	}
	if len(req.Tools) > 0 {
		tool := &genai.Tool{}
		for _, t := range req.Tools {
			schema, err := schemaObject(t.Schema)
			if err != nil {
				return nil, nil, &Error{Provider: Google, Kind: KindBadRequest, Message: fmt.Sprintf("tool %q: %v", t.Name, err)}
			}
			tool.FunctionDeclarations = append(tool.FunctionDeclarations, &genai.FunctionDeclaration{
				Name: t.Name, Description: t.Description, ParametersJsonSchema: schema})
		}
		cfg.Tools = []*genai.Tool{tool}
	}
	if req.Response != nil {
		schema, err := schemaObject(req.Response.Schema)
		if err != nil {
			return nil, nil, &Error{Provider: Google, Kind: KindBadRequest, Message: fmt.Sprintf("response schema: %v", err)}
		}
		cfg.ResponseMIMEType = "application/json"
		cfg.ResponseJsonSchema = schema
	}
	var contents []*genai.Content
	for i, m := range req.Messages {
		c := &genai.Content{}
		switch m.Role {
		case User:
			c.Role = genai.RoleUser
		case Assistant:
			c.Role = genai.RoleModel
		default:
			return nil, nil, &Error{Provider: Google, Kind: KindBadRequest, Message: fmt.Sprintf("message %d has role %q", i, m.Role)}
		}
		for _, r := range m.ToolResults {
			fr := &genai.FunctionResponse{Name: r.Name, Response: functionResponse(r)}
			if !strings.HasPrefix(r.CallID, localCallID) {
				fr.ID = r.CallID
			}
			c.Parts = append(c.Parts, &genai.Part{FunctionResponse: fr})
		}
		if m.Text != "" {
			c.Parts = append(c.Parts, &genai.Part{Text: m.Text})
		}
		for _, tc := range m.ToolCalls {
			var args map[string]any
			if len(tc.Args) > 0 {
				if err := json.Unmarshal(tc.Args, &args); err != nil {
					return nil, nil, &Error{Provider: Google, Kind: KindBadRequest, Message: fmt.Sprintf("message %d: call %q: arguments are not a JSON object", i, tc.Name)}
				}
			}
			fc := &genai.FunctionCall{Name: tc.Name, Args: args}
			if !strings.HasPrefix(tc.ID, localCallID) {
				fc.ID = tc.ID
			}
			c.Parts = append(c.Parts, &genai.Part{FunctionCall: fc, ThoughtSignature: tc.Signature})
		}
		if len(c.Parts) == 0 {
			return nil, nil, &Error{Provider: Google, Kind: KindBadRequest, Message: fmt.Sprintf("message %d is empty", i)}
		}
		contents = append(contents, c)
	}
	return contents, cfg, nil
}

// functionResponse puts a tool result under "output", or "error" for a
// failed call, as the Gemini API documents; JSON content goes as JSON.
func functionResponse(r ToolResult) map[string]any {
	var v any = r.Content
	var decoded any
	if json.Unmarshal([]byte(r.Content), &decoded) == nil {
		v = decoded
	}
	if r.IsError {
		return map[string]any{"error": v}
	}
	return map[string]any{"output": v}
}

func (p *googleProvider) wrap(err error) error {
	var ae genai.APIError
	if errors.As(err, &ae) {
		status := ae.Code
		msg := ae.Message
		if ae.Status != "" {
			msg = ae.Status + ": " + msg
		}
		e := statusError(Google, p.key, status, nil, msg)
		// Gemini answers an invalid key with 400 INVALID_ARGUMENT and
		// the reason API_KEY_INVALID.
		for _, d := range ae.Details {
			if r, _ := d["reason"].(string); r == "API_KEY_INVALID" || r == "API_KEY_EXPIRED" {
				e.Kind = KindAuth
			}
			// A 429 names its wait in a google.rpc.RetryInfo detail.
			if s, _ := d["retryDelay"].(string); s != "" {
				if dur, err := time.ParseDuration(s); err == nil && dur > 0 {
					e.RetryAfter = dur
				}
			}
		}
		if status == 0 {
			e.Kind = KindServer
		}
		return e
	}
	return transportError(Google, p.key, err)
}
