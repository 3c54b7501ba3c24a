package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/commitlayer/commitlayer/llm"
)

// Anthropic's Messages API: POST /v1/messages.

type antBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type antMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type antRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []antMessage    `json:"messages"`
	Tools     []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	OutputConfig *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	TopK        *float64 `json:"top_k"`
}

func antError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("request-id", "req_fake")
	writeJSON(w, status, map[string]any{"type": "error",
		"error": map[string]any{"type": typ, "message": msg}, "request_id": "req_fake"})
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" {
		antError(w, http.StatusNotFound, "not_found_error", "Not found: "+r.URL.Path)
		s.record(r, http.StatusNotFound, Turn{})
		return
	}
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if key != s.key {
		antError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		s.record(r, http.StatusUnauthorized, Turn{})
		return
	}
	body, bad := readJSON(r)
	var req antRequest
	if bad == "" {
		if err := json.Unmarshal(body, &req); err != nil {
			bad = "invalid request body: " + err.Error()
		}
	}
	var turn Turn
	if bad == "" {
		turn, bad = req.turn(r.Header.Get("Anthropic-Version"))
	}
	if bad != "" {
		antError(w, http.StatusBadRequest, "invalid_request_error", bad)
		s.record(r, http.StatusBadRequest, turn)
		return
	}
	turn.Provider = llm.Anthropic
	if f, ok := s.fault(); ok && !f.Malformed {
		s.record(r, f.Status, turn)
		switch {
		case f.Status == http.StatusTooManyRequests:
			retryAfterHeader(w, f.RetryAfter)
			antError(w, f.Status, "rate_limit_error", "This request would exceed your organization's rate limit.")
		case f.Status == 529:
			antError(w, f.Status, "overloaded_error", "Overloaded")
		default:
			antError(w, f.Status, "api_error", "Internal server error")
		}
		return
	} else if ok {
		s.record(r, http.StatusOK, turn)
		s.antReply(w, req, body, Reply{Calls: []Call{{Name: firstTool(turn), Args: json.RawMessage(`"{\"order_id\": "`)}}})
		return
	}
	reply, err := s.policy.Reply(turn)
	if err != nil {
		s.record(r, http.StatusInternalServerError, turn)
		antError(w, http.StatusInternalServerError, "api_error", "policy: "+err.Error())
		return
	}
	s.record(r, http.StatusOK, turn)
	s.antReply(w, req, body, reply)
}

func (s *Server) antReply(w http.ResponseWriter, req antRequest, body []byte, reply Reply) {
	n := s.id()
	content := []map[string]any{}
	if reply.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": reply.Text})
	}
	stop := "end_turn"
	for i, c := range reply.Calls {
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%04d_%d", n, i),
			"name": c.Name, "input": c.args()})
		stop = "tool_use"
	}
	out, _ := json.Marshal(content)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("msg_fake%04d", n), "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": tokens(len(body)), "output_tokens": tokens(len(out)),
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	})
}

// turn checks the request's shape and decodes it.
func (req antRequest) turn(version string) (Turn, string) {
	t := Turn{Model: req.Model, MaxTokens: req.MaxTokens}
	switch {
	case version == "":
		return t, "anthropic-version: header is required"
	case req.Model == "":
		return t, "model: Field required"
	case req.MaxTokens <= 0:
		return t, "max_tokens: Field required"
	case len(req.Messages) == 0:
		return t, "messages: at least one message is required"
	case req.Temperature != nil:
		return t, "temperature: Extra inputs are not permitted"
	case req.TopP != nil || req.TopK != nil:
		return t, "top_p: Extra inputs are not permitted"
	}
	if len(req.System) > 0 {
		var s string
		if json.Unmarshal(req.System, &s) != nil {
			var blocks []antBlock
			if err := json.Unmarshal(req.System, &blocks); err != nil {
				return t, "system: Input should be a valid string or a list of text blocks"
			}
			for _, b := range blocks {
				s += b.Text
			}
		}
		t.System = s
	}
	for _, tool := range req.Tools {
		var sch struct {
			Type string `json:"type"`
		}
		if tool.Name == "" || json.Unmarshal(tool.InputSchema, &sch) != nil || sch.Type != "object" {
			return t, fmt.Sprintf("tools: tool %q: input_schema.type must be \"object\"", tool.Name)
		}
		t.Tools = append(t.Tools, llm.Tool{Name: tool.Name, Description: tool.Description, Schema: tool.InputSchema})
	}
	if oc := req.OutputConfig; oc != nil && oc.Format != nil {
		if oc.Format.Type != "json_schema" || len(oc.Format.Schema) == 0 {
			return t, "output_config.format: type must be json_schema with a schema"
		}
		t.Response = &llm.ResponseSchema{Schema: oc.Format.Schema}
	}
	var pending map[string]bool // tool_use ids the next user message must answer
	for i, m := range req.Messages {
		var blocks []antBlock
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				return t, fmt.Sprintf("messages.%d.content: Input should be a valid string or list", i)
			}
		} else {
			blocks = []antBlock{{Type: "text", Text: text}}
		}
		msg := llm.Message{}
		switch m.Role {
		case "user":
			msg.Role = llm.User
		case "assistant":
			msg.Role = llm.Assistant
		default:
			return t, fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i == 0 && msg.Role != llm.User {
			return t, "messages: first message must use the \"user\" role"
		}
		answered := map[string]bool{}
		for j, b := range blocks {
			switch b.Type {
			case "text":
				msg.Text += b.Text
			case "tool_use":
				if msg.Role != llm.Assistant {
					return t, fmt.Sprintf("messages.%d.content.%d: tool_use blocks belong to assistant messages", i, j)
				}
				var obj map[string]any
				if b.ID == "" || b.Name == "" || json.Unmarshal(b.Input, &obj) != nil || obj == nil {
					return t, fmt.Sprintf("messages.%d.content.%d.tool_use: id, name and an input object are required", i, j)
				}
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Args: b.Input})
			case "tool_result":
				if !pending[b.ToolUseID] {
					return t, fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
				content := ""
				if json.Unmarshal(b.Content, &content) != nil {
					var parts []antBlock
					_ = json.Unmarshal(b.Content, &parts)
					for _, p := range parts {
						content += p.Text
					}
				}
				msg.ToolResults = append(msg.ToolResults, llm.ToolResult{CallID: b.ToolUseID, Content: content, IsError: b.IsError})
			default:
				return t, fmt.Sprintf("messages.%d.content.%d.type: unsupported block type %q", i, j, b.Type)
			}
		}
		for id := range pending {
			if !answered[id] {
				return t, fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i, id)
			}
		}
		pending = nil
		if len(msg.ToolCalls) > 0 {
			pending = map[string]bool{}
			for _, c := range msg.ToolCalls {
				pending[c.ID] = true
			}
		}
		t.Messages = append(t.Messages, msg)
	}
	linkResults(t.Messages)
	return t, ""
}

// firstTool names the first tool offered, for a malformed call.
func firstTool(t Turn) string {
	if len(t.Tools) > 0 {
		return t.Tools[0].Name
	}
	return "tool"
}
