package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/commitlayer/commitlayer/llm"
)

// OpenAI's Chat Completions: POST /v1/chat/completions.

type oaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaiMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oaiToolCall   `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oaiRequest struct {
	Model               string       `json:"model"`
	Messages            []oaiMessage `json:"messages"`
	MaxCompletionTokens int          `json:"max_completion_tokens"`
	MaxTokens           int          `json:"max_tokens"`
	Temperature         *float64     `json:"temperature"`
	Tools               []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

func oaiError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}

func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		oaiError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL: POST "+r.URL.Path)
		s.record(r, http.StatusNotFound, Turn{})
		return
	}
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if key != s.key {
		oaiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			fmt.Sprintf("Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", mask(key)))
		s.record(r, http.StatusUnauthorized, Turn{})
		return
	}
	body, bad := readJSON(r)
	var req oaiRequest
	if bad == "" {
		if err := json.Unmarshal(body, &req); err != nil {
			bad = "We could not parse the JSON body of your request: " + err.Error()
		}
	}
	var turn Turn
	if bad == "" {
		turn, bad = req.turn()
	}
	if bad != "" {
		oaiError(w, http.StatusBadRequest, "invalid_request_error", "", bad)
		s.record(r, http.StatusBadRequest, turn)
		return
	}
	turn.Provider = llm.OpenAI
	if f, ok := s.fault(); ok && !f.Malformed {
		s.record(r, f.Status, turn)
		if f.Status == http.StatusTooManyRequests {
			retryAfterHeader(w, f.RetryAfter)
			if f.RetryAfter > 0 {
				w.Header().Set("Retry-After-Ms", fmt.Sprint(f.RetryAfter.Milliseconds()))
			}
			oaiError(w, f.Status, "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later.")
			return
		}
		oaiError(w, f.Status, "server_error", "", "The server had an error while processing your request. Sorry about that!")
		return
	} else if ok {
		s.record(r, http.StatusOK, turn)
		s.oaiReply(w, req, body, Reply{Calls: []Call{{Name: firstTool(turn), Args: json.RawMessage(`"{\"order_id\": "`)}}}, true)
		return
	}
	reply, err := s.policy.Reply(turn)
	if err != nil {
		s.record(r, http.StatusInternalServerError, turn)
		oaiError(w, http.StatusInternalServerError, "server_error", "", "policy: "+err.Error())
		return
	}
	s.record(r, http.StatusOK, turn)
	s.oaiReply(w, req, body, reply, false)
}

func (s *Server) oaiReply(w http.ResponseWriter, req oaiRequest, body []byte, reply Reply, malformed bool) {
	n := s.id()
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if reply.Text != "" {
		msg["content"] = reply.Text
	}
	finish := "stop"
	var calls []map[string]any
	for i, c := range reply.Calls {
		args := string(c.args())
		if malformed {
			args = `{"order_id": ` // cut off mid-object
		}
		calls = append(calls, map[string]any{"id": fmt.Sprintf("call_fake%04d_%d", n, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": args}})
		finish = "tool_calls"
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	out, _ := json.Marshal(msg)
	in, outN := tokens(len(body)), tokens(len(out))
	writeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("chatcmpl-fake%04d", n), "object": "chat.completion", "created": 1767225600,
		"model": req.Model, "system_fingerprint": "fp_fake", "service_tier": "default",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": outN, "total_tokens": in + outN},
	})
}

func (req oaiRequest) turn() (Turn, string) {
	t := Turn{Model: req.Model, MaxTokens: max(req.MaxCompletionTokens, req.MaxTokens), Temperature: req.Temperature}
	switch {
	case req.Model == "":
		return t, "you must provide a model parameter"
	case len(req.Messages) == 0:
		return t, "'messages' must contain at least one message"
	case req.Temperature != nil && (*req.Temperature < 0 || *req.Temperature > 2):
		return t, "'temperature' must be between 0 and 2"
	}
	for i, tool := range req.Tools {
		if tool.Type != "function" || tool.Function.Name == "" {
			return t, fmt.Sprintf("Invalid value for 'tools[%d]': a function tool with a name is required", i)
		}
		schema := tool.Function.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		t.Tools = append(t.Tools, llm.Tool{Name: tool.Function.Name, Description: tool.Function.Description, Schema: schema})
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type == "json_schema" {
		if rf.JSONSchema == nil || rf.JSONSchema.Name == "" || len(rf.JSONSchema.Schema) == 0 {
			return t, "Missing required parameter: 'response_format.json_schema.name'"
		}
		t.Response = &llm.ResponseSchema{Name: rf.JSONSchema.Name, Schema: rf.JSONSchema.Schema}
	}
	var pending map[string]bool // tool_call ids that tool messages must answer next
	var cur *llm.Message        // the user message collecting tool results
	flush := func() {
		if cur != nil {
			t.Messages = append(t.Messages, *cur)
			cur = nil
		}
	}
	for i, m := range req.Messages {
		text, err := oaiText(m.Content)
		if err != nil {
			return t, fmt.Sprintf("Invalid 'messages[%d].content': %v", i, err)
		}
		if m.Role != "tool" && len(pending) > 0 {
			return t, "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(keys(pending), ", ")
		}
		switch m.Role {
		case "system", "developer":
			t.System += text
		case "user":
			flush()
			t.Messages = append(t.Messages, llm.Message{Role: llm.User, Text: text})
		case "assistant":
			flush()
			msg := llm.Message{Role: llm.Assistant, Text: text}
			pending = map[string]bool{}
			for j, c := range m.ToolCalls {
				var obj map[string]any
				if c.ID == "" || c.Type != "function" || json.Unmarshal([]byte(c.Function.Arguments), &obj) != nil || obj == nil {
					return t, fmt.Sprintf("Invalid 'messages[%d].tool_calls[%d]': a function call with an id and JSON object arguments is required", i, j)
				}
				pending[c.ID] = true
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Args: json.RawMessage(c.Function.Arguments)})
			}
			t.Messages = append(t.Messages, msg)
		case "tool":
			if !pending[m.ToolCallID] {
				return t, fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[%d])", i)
			}
			delete(pending, m.ToolCallID)
			if cur == nil {
				cur = &llm.Message{Role: llm.User}
			}
			// Chat Completions has no error flag: the content says it.
			cur.ToolResults = append(cur.ToolResults, llm.ToolResult{CallID: m.ToolCallID, Content: text})
		default:
			return t, fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.", m.Role)
		}
	}
	flush()
	linkResults(t.Messages)
	return t, ""
}

// oaiText reads a message's content: a string, null, or text parts.
func oaiText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("expected a string or an array of content parts")
	}
	for _, p := range parts {
		s += p.Text
	}
	return s, nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
