package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/commitlayer/commitlayer/llm"
)

// The Gemini API: POST /v1beta/models/{model}:generateContent.

type gemPart struct {
	Text         string `json:"text,omitempty"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse,omitempty"`
	ThoughtSignature []byte `json:"thoughtSignature,omitempty"`
}

type gemContent struct {
	Role  string    `json:"role"`
	Parts []gemPart `json:"parts"`
}

type gemRequest struct {
	Contents          []gemContent `json:"contents"`
	SystemInstruction *gemContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig *struct {
		MaxOutputTokens    int             `json:"maxOutputTokens"`
		Temperature        *float64        `json:"temperature"`
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

func gemError(w http.ResponseWriter, code int, status, msg string, details ...map[string]any) {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if details != nil {
		e["details"] = details
	}
	writeJSON(w, code, map[string]any{"error": e})
}

func (s *Server) google(w http.ResponseWriter, r *http.Request) {
	model, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	model, ok2 := strings.CutSuffix(model, ":generateContent")
	if !ok || !ok2 || model == "" {
		gemError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found: "+r.URL.Path)
		s.record(r, http.StatusNotFound, Turn{})
		return
	}
	key := r.Header.Get("X-Goog-Api-Key")
	if key == "" {
		key = r.URL.Query().Get("key")
	}
	if key != s.key {
		// Gemini answers a bad key with 400, not 401.
		gemError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
			map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
				"domain": "googleapis.com", "metadata": map[string]any{"service": "generativelanguage.googleapis.com"}})
		s.record(r, http.StatusBadRequest, Turn{})
		return
	}
	body, bad := readJSON(r)
	var req gemRequest
	if bad == "" {
		if err := json.Unmarshal(body, &req); err != nil {
			bad = "Invalid JSON payload received. " + err.Error()
		}
	}
	var turn Turn
	if bad == "" {
		turn, bad = req.turn(s, model)
	}
	if bad != "" {
		gemError(w, http.StatusBadRequest, "INVALID_ARGUMENT", bad)
		s.record(r, http.StatusBadRequest, turn)
		return
	}
	turn.Provider = llm.Google
	if f, ok := s.fault(); ok && !f.Malformed {
		s.record(r, f.Status, turn)
		switch {
		case f.Status == http.StatusTooManyRequests:
			var details []map[string]any
			if f.RetryAfter > 0 {
				details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
					"retryDelay": fmt.Sprintf("%ds", max(int(f.RetryAfter.Seconds()), 1))})
			}
			gemError(w, f.Status, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", details...)
		case f.Status == http.StatusServiceUnavailable:
			gemError(w, f.Status, "UNAVAILABLE", "The model is overloaded. Please try again later.")
		default:
			gemError(w, f.Status, "INTERNAL", "An internal error has occurred.")
		}
		return
	} else if ok {
		s.record(r, http.StatusOK, turn)
		n := s.id()
		writeJSON(w, http.StatusOK, map[string]any{
			"candidates":    []any{map[string]any{"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0, "finishMessage": "Malformed function call: " + firstTool(turn) + "({order_id: "}},
			"usageMetadata": map[string]any{"promptTokenCount": tokens(len(body)), "totalTokenCount": tokens(len(body))},
			"modelVersion":  model, "responseId": fmt.Sprintf("fake%04d", n),
		})
		return
	}
	reply, err := s.policy.Reply(turn)
	if err != nil {
		s.record(r, http.StatusInternalServerError, turn)
		gemError(w, http.StatusInternalServerError, "INTERNAL", "policy: "+err.Error())
		return
	}
	s.record(r, http.StatusOK, turn)
	n := s.id()
	parts := []map[string]any{}
	if reply.Text != "" {
		parts = append(parts, map[string]any{"text": reply.Text})
	}
	for i, c := range reply.Calls {
		// Gemini gives function calls ids; ask the adapter to send them back.
		fc := map[string]any{"id": fmt.Sprintf("fc_fake%04d_%d", n, i), "name": c.Name, "args": c.args()}
		if s.noIDs {
			delete(fc, "id")
		}
		parts = append(parts, map[string]any{"functionCall": fc})
	}
	out, _ := json.Marshal(parts)
	in, outN := tokens(len(body)), tokens(len(out))
	writeJSON(w, http.StatusOK, map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": in, "candidatesTokenCount": outN, "totalTokenCount": in + outN},
		"modelVersion":  model, "responseId": fmt.Sprintf("fake%04d", n),
	})
}

func (req gemRequest) turn(s *Server, model string) (Turn, string) {
	t := Turn{Model: model}
	if gc := req.GenerationConfig; gc != nil {
		t.MaxTokens, t.Temperature = gc.MaxOutputTokens, gc.Temperature
		if gc.ResponseMimeType == "application/json" {
			schema := gc.ResponseJSONSchema
			if len(schema) == 0 {
				schema = gc.ResponseSchema
			}
			t.Response = &llm.ResponseSchema{Schema: schema}
		} else if len(gc.ResponseJSONSchema) > 0 {
			return t, "* GenerateContentRequest.generation_config.response_mime_type: must be application/json when a response schema is set"
		}
	}
	if len(req.Contents) == 0 {
		return t, "* GenerateContentRequest.contents: contents is not specified"
	}
	if si := req.SystemInstruction; si != nil {
		for _, p := range si.Parts {
			t.System += p.Text
		}
	}
	for _, tool := range req.Tools {
		for _, fd := range tool.FunctionDeclarations {
			schema := fd.ParametersJSONSchema
			if len(schema) == 0 {
				schema = fd.Parameters
			}
			if fd.Name == "" {
				return t, "* GenerateContentRequest.tools[0].function_declarations: name is required"
			}
			t.Tools = append(t.Tools, llm.Tool{Name: fd.Name, Description: fd.Description, Schema: schema})
		}
	}
	var called map[string]bool // function names the previous model turn called
	var prev []llm.ToolCall    // its calls, to match responses that carry no id
	for i, c := range req.Contents {
		msg := llm.Message{}
		switch c.Role {
		case "user", "":
			msg.Role = llm.User
		case "model":
			msg.Role = llm.Assistant
		default:
			return t, fmt.Sprintf("* GenerateContentRequest.contents[%d].role: Please use a valid role: user, model.", i)
		}
		if len(c.Parts) == 0 {
			return t, fmt.Sprintf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i)
		}
		next := map[string]bool{}
		var calls []llm.ToolCall
		for j, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				var obj map[string]any
				if msg.Role != llm.Assistant || p.FunctionCall.Name == "" {
					return t, fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].function_call: only model turns call functions", i, j)
				}
				args := p.FunctionCall.Args
				if len(args) == 0 {
					args = json.RawMessage("{}")
				} else if json.Unmarshal(args, &obj) != nil {
					return t, fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].function_call.args: must be an object", i, j)
				}
				if p.FunctionCall.ID != "" && s.noIDs {
					return t, fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].function_call.id: %q was never given", i, j, p.FunctionCall.ID)
				}
				id := p.FunctionCall.ID
				if id == "" { // the policy pairs calls and results by id
					id = fmt.Sprintf("fc#%d#%d", i, j)
				}
				next[p.FunctionCall.Name] = true
				calls = append(calls, llm.ToolCall{ID: id, Name: p.FunctionCall.Name})
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: id, Name: p.FunctionCall.Name, Args: args})
			case p.FunctionResponse != nil:
				fr := p.FunctionResponse
				if !called[fr.Name] {
					return t, fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].function_response.name: %q answers no function call of the previous model turn", i, j, fr.Name)
				}
				content, isErr := gemResponse(fr.Response)
				if fr.ID != "" && s.noIDs {
					return t, fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].function_response.id: %q names no function call", i, j, fr.ID)
				}
				id := fr.ID
				if id == "" { // matched by name, in order
					for k, c := range prev {
						if c.Name == fr.Name && c.ID != "" {
							id, prev[k].ID = c.ID, ""
							break
						}
					}
				}
				msg.ToolResults = append(msg.ToolResults, llm.ToolResult{CallID: id, Name: fr.Name, Content: content, IsError: isErr})
			default:
				msg.Text += p.Text
			}
		}
		called, prev = next, calls
		t.Messages = append(t.Messages, msg)
	}
	return t, ""
}

// gemResponse reads a function response's {"output": …} or {"error": …}.
func gemResponse(raw json.RawMessage) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return string(raw), false
	}
	v, isErr := m["output"], false
	if e, ok := m["error"]; ok {
		v, isErr = e, true
	}
	if v == nil {
		return string(raw), false
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, isErr
	}
	return string(v), isErr
}
