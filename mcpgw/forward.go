//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 only; agents on 2025-06-18 and 2025-11-25 use it

package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// forward is the receiving middleware that forwards an agent's requests
// upstream, each within CallTimeout, and answers with the upstream's JSON
// as sent (guard.go keeps it; docs/recording.md, "What passes through").
// Ping, initialize and logging/setLevel concern the agent's own session:
// the SDK answers them.
func (g *Gateway) forward(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		var raw json.RawMessage
		var err error
		switch p := req.GetParams().(type) {
		case *mcp.CallToolParamsRaw:
			return g.callTool(ctx, req.(*mcp.CallToolRequest)), nil
		case *mcp.ListToolsParams:
			raw, err = relay(g, ctx, ss, method, p, (*mcp.ClientSession).ListTools)
			err = g.listed(ss, method, p == nil || p.Cursor == "", raw, err)
		case *mcp.ListResourcesParams:
			raw, err = relay(g, ctx, ss, method, p, (*mcp.ClientSession).ListResources)
			err = g.listed(ss, method, p == nil || p.Cursor == "", raw, err)
		case *mcp.ListResourceTemplatesParams:
			raw, err = relay(g, ctx, ss, method, p, (*mcp.ClientSession).ListResourceTemplates)
			err = g.listed(ss, method, p == nil || p.Cursor == "", raw, err)
		case *mcp.ListPromptsParams:
			raw, err = relay(g, ctx, ss, method, p, (*mcp.ClientSession).ListPrompts)
			err = g.listed(ss, method, p == nil || p.Cursor == "", raw, err)
		case *mcp.ReadResourceParams:
			raw, err = relay(g, ctx, ss, method, p, (*mcp.ClientSession).ReadResource)
		case *mcp.GetPromptParams:
			raw, err = relay(g, ctx, ss, method, p, (*mcp.ClientSession).GetPrompt)
		case *mcp.CompleteParams:
			raw, err = relay(g, ctx, ss, method, p, (*mcp.ClientSession).Complete)
		default:
			return next(ctx, method, req)
		}
		if err != nil {
			return nil, err
		}
		return resultOf(raw), nil
	}
}

// rawResult is a result answered as the upstream's JSON, as sent. It
// embeds an empty result of the SDK's only to be an mcp.Result.
type rawResult struct {
	*mcp.CallToolResult
	raw json.RawMessage
}

func (r rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

func resultOf(raw json.RawMessage) mcp.Result { return rawResult{&mcp.CallToolResult{}, raw} }

// relay forwards one request on the upstream session within CallTimeout
// and returns the upstream's result as sent; its error as a JSON-RPC error
// (the upstream's own as it was).
func relay[P interface {
	*T
	mcp.Params
}, T any, R any](g *Gateway, ctx context.Context, ss *mcp.ServerSession, method string, p P,
	call func(*mcp.ClientSession, context.Context, P) (R, error)) (json.RawMessage, error) {
	cs, err := g.session()
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	p, done := withProgress(g, ctx, ss, p)
	defer done()
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	cctx, s := withSlot(cctx)
	_, err = call(cs, cctx, p)
	if raw := s.Load(); raw != nil {
		return *raw, nil // as sent, even where the SDK's own types would refuse it
	}
	if err == nil {
		err = errors.New("no result")
	}
	g.failed(cs, err)
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr):
		return nil, werr
	case ctx.Err() == nil && cctx.Err() != nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"the upstream MCP server did not answer %s within %s (-call-timeout); the gateway asked it to cancel", method, g.cfg.CallTimeout)}
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream MCP server, %s: %v", method, g.scrub(err))}
}

// listed counts a page of a listing an agent pages through (a request
// without a cursor starts one) and refuses one that runs past the bounds.
func (g *Gateway) listed(ss *mcp.ServerSession, method string, first bool, raw json.RawMessage, err error) error {
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%p %s", ss, method)
	n, _ := g.listings.Get(key)
	if first {
		n = [2]int{}
	}
	n[0]++
	n[1] += len(raw)
	g.listings.Add(key, n)
	if n[0] > g.cfg.MaxListPages || n[1] > g.cfg.MaxListBytes {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"the upstream MCP server's %s ran past %d pages or %d bytes (-max-list-pages, -max-list-bytes); refused",
			method, g.cfg.MaxListPages, g.cfg.MaxListBytes)}
	}
	return nil
}

// toolResult is what the gateway reads of a tools/call result.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

// toolError is a tool result saying the call failed.
func toolError(format string, args ...any) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"isError": true,
		"content": []map[string]string{{"type": "text", "text": fmt.Sprintf(format, args...)}}})
	return b
}

// callTool forwards one call upstream and records it when bound. Whatever
// the upstream answers (an error, nothing, a panic in here), the agent gets
// a tool result; once the upstream has answered, its answer (a panic while
// recording must not turn a refund that happened into a failed call).
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (res mcp.Result) {
	var raw json.RawMessage
	name := ""
	defer func() {
		if r := recover(); r != nil {
			g.log.ErrorContext(ctx, "mcp gateway: call failed inside the gateway", "tool", name, "panic", fmt.Sprint(r))
			if raw == nil {
				raw = toolError("the CommitLayer gateway failed on this call of %s", name)
			}
			res = resultOf(raw)
		}
	}()
	start := g.cfg.Now().UTC()
	var rawArgs json.RawMessage
	var meta mcp.Meta
	if req.Params != nil {
		name, rawArgs, meta = req.Params.Name, req.Params.Arguments, req.Params.Meta
	}
	reqID, uctx := "", ctx
	if req.Extra != nil {
		reqID = req.Extra.Header.Get(HeaderRequestID)
		if v := req.Extra.Header.Get("Authorization"); g.cfg.ForwardAuth && v != "" {
			uctx = context.WithValue(ctx, authKey{}, v)
		}
	}
	if v, ok := meta[metaRequestID]; ok { // the gateway's own (tagBatchCalls): never forwarded
		if s, ok := v.(string); ok && reqID == "" {
			reqID = s
		}
		meta = maps.Clone(meta)
		delete(meta, metaRequestID)
	}
	params := &mcp.CallToolParams{Meta: meta, Name: name}
	if len(rawArgs) > 0 {
		params.Arguments = rawArgs
	}
	raw, err := relay(g, uctx, req.Session, "tools/call", params, (*mcp.ClientSession).CallTool)
	switch {
	case err != nil && ctx.Err() != nil:
		// The agent cancelled the call (notifications/cancelled): the SDK
		// sends it no answer, and the upstream was told to stop.
		raw = toolError("the call was cancelled before the upstream MCP server answered")
	case err != nil:
		g.log.WarnContext(ctx, "mcp gateway: upstream call failed", "tool", name, "error", err)
		msg := err.Error()
		if !strings.Contains(msg, "upstream MCP server") {
			msg = "upstream MCP server: " + msg
		}
		raw = toolError("%s", msg)
	}
	var tr toolResult
	if json.Unmarshal(raw, &tr) != nil {
		raw = toolError("the upstream MCP server's result for %s is not a tool result", name)
		tr.IsError = true
	}
	if notes := g.record(ctx, req, name, reqID, rawArgs, tr, start); len(notes) > 0 {
		raw = withNotes(raw, notes)
	}
	return resultOf(raw)
}

// withNotes appends text blocks to a tool result's content; the result's
// values are kept as they were.
func withNotes(raw json.RawMessage, notes []string) json.RawMessage {
	var m map[string]json.RawMessage
	var content []json.RawMessage
	if json.Unmarshal(raw, &m) != nil || json.Unmarshal(m["content"], &content) != nil && m["content"] != nil {
		return raw
	}
	for _, n := range notes {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": n})
		content = append(content, b)
	}
	m["content"], _ = json.Marshal(content)
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// subscribe forwards an agent's resources/subscribe; the SDK keeps which
// agent sessions want which URI and tells them of updates. The URIs are
// kept (at most maxSubscriptions) to subscribe a new upstream session
// again (resubscribe). Unsubscribing is the SDK's alone: the upstream
// keeps sending updates nobody is told of, which costs nothing.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	if req.Params == nil || req.Params.URI == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "resources/subscribe needs a uri"}
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	_, err := relay(g, ctx, ss, "resources/subscribe", &mcp.SubscribeParams{URI: req.Params.URI},
		func(cs *mcp.ClientSession, ctx context.Context, p *mcp.SubscribeParams) (any, error) {
			return nil, cs.Subscribe(ctx, p)
		})
	g.subMu.Lock()
	if err == nil && len(g.subURIs) < maxSubscriptions {
		g.subURIs[req.Params.URI] = true
	}
	g.subMu.Unlock()
	return err
}

const maxSubscriptions = 10000

// resubscribe subscribes a new upstream session to the URIs agents
// subscribed to.
func (g *Gateway) resubscribe(ctx context.Context, cs *mcp.ClientSession) {
	g.subMu.Lock()
	uris := slices.Collect(maps.Keys(g.subURIs))
	g.subMu.Unlock()
	for _, uri := range uris {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			g.log.WarnContext(ctx, "mcp gateway: subscribe again upstream", "uri", uri, "error", err)
		}
	}
}

func (g *Gateway) unsubscribe(context.Context, *mcp.UnsubscribeRequest) error { return nil }

// notifyListChanged tells every agent session that the upstream's tools,
// prompts or resources changed. The SDK sends notifications/*/list_changed
// when its own registry changes; the gateway forwards the lists
// themselves, so it changes the registry by adding and removing a
// placeholder nobody sees (forward answers the lists), and the SDK's
// debounce sends one notification.
func (g *Gateway) notifyListChanged(method string) {
	s := g.server
	if s == nil {
		return
	}
	const name = "commitlayer-gateway-placeholder"
	switch {
	case strings.HasPrefix(method, "notifications/tools/"):
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return nil, errors.New("not served")
			})
		s.RemoveTools(name)
	case strings.HasPrefix(method, "notifications/prompts/") && g.caps.Prompts != nil:
		s.AddPrompt(&mcp.Prompt{Name: name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, errors.New("not served")
		})
		s.RemovePrompts(name)
	case strings.HasPrefix(method, "notifications/resources/") && g.caps.Resources != nil:
		const uri = "commitlayer-gateway:placeholder"
		s.AddResource(&mcp.Resource{URI: uri, Name: name}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, errors.New("not served")
		})
		s.RemoveResources(uri)
	}
}

// progressRoute is where an upstream's progress for one forwarded request
// goes: the agent's session, its own token, and the context of its
// request (so the SDK sends the notification on that request's stream).
type progressRoute struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any
}

// withProgress returns p to send upstream: a copy with a progress token of
// the gateway's when the agent asked for progress (agents pick their
// tokens, two may pick the same, and share one upstream session), and a
// func that ends the route once the request is answered.
func withProgress[P interface {
	*T
	mcp.Params
}, T any](g *Gateway, ctx context.Context, ss *mcp.ServerSession, p P) (P, func()) {
	if p == nil || ss == nil {
		return p, func() {}
	}
	meta := p.GetMeta()
	token, ok := meta[progressTokenKey]
	if !ok || token == nil {
		return p, func() {}
	}
	id := "clgw-" + strconv.FormatUint(g.progNext.Add(1), 10)
	g.progRoutes.Store(id, progressRoute{ctx: ctx, ss: ss, token: token})
	cp := *p
	out := P(&cp)
	m := maps.Clone(meta)
	m[progressTokenKey] = id
	out.SetMeta(m)
	return out, func() { g.progRoutes.Delete(id) }
}

const progressTokenKey = "progressToken"

// relayProgress sends the upstream's progress on a forwarded request to the
// agent that asked for it, with the agent's token; false when the token is
// none of the gateway's.
func (g *Gateway) relayProgress(raw json.RawMessage) bool {
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(raw, &p) != nil {
		return false
	}
	id, _ := p.ProgressToken.(string)
	v, ok := g.progRoutes.Load(id)
	if !ok {
		return false
	}
	r := v.(progressRoute)
	p.ProgressToken = r.token
	if err := r.ss.NotifyProgress(r.ctx, &p); err != nil {
		g.log.Debug("mcp gateway: relay progress", "error", err)
	}
	return true
}

// relayLog sends the upstream's log messages to every agent session (each
// at the level it set with logging/setLevel; none before it sets one).
func (g *Gateway) relayLog(ctx context.Context, req *mcp.LoggingMessageRequest) {
	s := g.server
	if s == nil || req.Params == nil {
		return
	}
	for ss := range s.Sessions() {
		_ = ss.Log(ctx, req.Params)
	}
}
