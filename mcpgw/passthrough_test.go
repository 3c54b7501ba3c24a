//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 only; agents on 2025-06-18 and 2025-11-25 use it

package mcpgw_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/mcpgw"
)

// richUpstream is an upstream with everything MCP has besides tools:
// resources (paged two at a time), a template, prompts, completions,
// subscriptions, logging, progress, a tool answering structuredContent,
// isError and _meta, and one that blocks until cancelled.
type richUpstream struct {
	server    *mcp.Server
	cancelled chan struct{} // closed when the blocking tool sees its context end
	progress  chan any      // the progress tokens the upstream saw
}

func newRichUpstream(t *testing.T) (*richUpstream, *httptest.Server) {
	u := &richUpstream{cancelled: make(chan struct{}), progress: make(chan any, 8)}
	var once sync.Once
	s := mcp.NewServer(&mcp.Implementation{Name: "rich", Version: "1"}, &mcp.ServerOptions{
		PageSize:     2,
		Instructions: "use refund for refunds",
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "-done"}}}, nil
		},
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for i := range 5 {
		uri := fmt.Sprintf("file:///doc%d.txt", i)
		s.AddResource(&mcp.Resource{URI: uri, Name: fmt.Sprintf("doc%d", i), MIMEType: "text/plain"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "body of " + req.Params.URI}}}, nil
			})
	}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "orders://{id}", Name: "order"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "order " + req.Params.URI}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["name"]}}}}, nil
		})
	for i := range 5 {
		s.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%d", i), InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	s.AddTool(&mcp.Tool{Name: "structured", InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Meta: mcp.Meta{"trace": "t-1"},
				StructuredContent: map[string]any{"n": 9007199254740993},
				Content: []mcp.Content{&mcp.TextContent{Text: `{"n":9007199254740993}`},
					&mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			u.progress <- tok
			if tok != nil {
				for i := 1; i <= 2; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: "step"})
				}
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "slow tool ran"})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				once.Do(func() { close(u.cancelled) })
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not cancelled"}}}, nil
			}
		})
	u.server = s
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return u, srv
}

// TestGatewayPassthrough drives everything that is not a bound tool call
// through the gateway with the SDK's client: capabilities and
// instructions, tools/list pages, resources (pages with the upstream's
// cursors, templates, read, a missing one's error as the upstream gave it,
// subscribe and updates), prompts, completions, ping, a result's
// structuredContent, isError and _meta, progress with the agent's token,
// cancellation reaching the upstream, list_changed and log messages.
func TestGatewayPassthrough(t *testing.T) {
	up, upSrv := newRichUpstream(t)
	rec := newFakeRecorder(t)
	g := newGateway(t, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{URL: upSrv.URL}}, io.Discard)
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	var progress []*mcp.ProgressNotificationParams
	var logs []*mcp.LoggingMessageParams
	var updated []string
	toolsChanged := make(chan struct{}, 4)
	resourcesChanged := make(chan struct{}, 4)
	promptsChanged := make(chan struct{}, 4)
	c := mcp.NewClient(&mcp.Implementation{Name: "pass-agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params)
			mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			mu.Lock()
			logs = append(logs, r.Params)
			mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			mu.Lock()
			updated = append(updated, r.Params.URI)
			mu.Unlock()
		},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { toolsChanged <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resourcesChanged <- struct{}{} },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	init := cs.InitializeResult()
	require.NotEmpty(t, cs.ID(), "a Streamable HTTP session has an Mcp-Session-Id")
	require.Equal(t, "use refund for refunds", init.Instructions)
	require.NotNil(t, init.Capabilities.Tools)
	require.True(t, init.Capabilities.Tools.ListChanged)
	require.NotNil(t, init.Capabilities.Prompts)
	require.NotNil(t, init.Capabilities.Resources)
	require.True(t, init.Capabilities.Resources.Subscribe)
	require.NotNil(t, init.Capabilities.Completions)

	// tools/list: the upstream's pages (of 2) and cursors, as they are.
	var names []string
	cursor := ""
	pages := 0
	for {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		require.NoError(t, err)
		require.LessOrEqual(t, len(res.Tools), 2)
		pages++
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
			if tl.Name == "structured" {
				require.NotNil(t, tl.OutputSchema, "the upstream's output schema is served")
			}
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	require.Len(t, names, 8)
	require.Equal(t, 4, pages)

	// resources/list: the upstream's pages and cursors, as they are.
	var uris []string
	rl, err := cs.ListResources(ctx, nil)
	require.NoError(t, err)
	require.Len(t, rl.Resources, 2)
	require.NotEmpty(t, rl.NextCursor)
	for r, err := range cs.Resources(ctx, nil) {
		require.NoError(t, err)
		uris = append(uris, r.URI)
	}
	require.Len(t, uris, 5)
	_, err = cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "not-a-cursor"})
	require.Error(t, err, "a cursor the upstream did not give is its error")

	tl, err := cs.ListResourceTemplates(ctx, nil)
	require.NoError(t, err)
	require.Len(t, tl.ResourceTemplates, 1)
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///doc3.txt"})
	require.NoError(t, err)
	require.Equal(t, "body of file:///doc3.txt", rr.Contents[0].Text)
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "orders://o_9"})
	require.NoError(t, err)
	require.Equal(t, "order orders://o_9", rr.Contents[0].Text)
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///missing"})
	var werr, direct *jsonrpc.Error
	require.ErrorAs(t, err, &werr)
	upc, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: upSrv.URL}, nil)
	require.NoError(t, err)
	_, err = upc.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///missing"})
	require.ErrorAs(t, err, &direct)
	_ = upc.Close()
	require.Equal(t, *direct, *werr, "the upstream's error as it gave it")

	pl, err := cs.ListPrompts(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "greet", pl.Prompts[0].Name)
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "ada"}})
	require.NoError(t, err)
	require.Equal(t, "hello ada", gp.Messages[0].Content.(*mcp.TextContent).Text)
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "nope"})
	require.Error(t, err)

	cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "ad"}})
	require.NoError(t, err)
	require.Equal(t, []string{"ad-done"}, cr.Completion.Values)

	require.NoError(t, cs.Ping(ctx, nil))

	// A result as the upstream gave it: structuredContent (a big integer
	// exact), isError, _meta, an image.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "structured", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "t-1", res.Meta["trace"])
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":9007199254740993}`, string(raw))
	require.Len(t, res.Content, 2)
	require.Equal(t, []byte{1, 2, 3}, res.Content[1].(*mcp.ImageContent).Data)

	// Progress: the upstream sees a token of the gateway's, the agent its own.
	require.NoError(t, cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}))
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Meta: mcp.Meta{"progressToken": "agent-tok"}})
	require.NoError(t, err)
	require.Equal(t, "slow done", text(t, res)[0])
	require.NotEqual(t, "agent-tok", <-up.progress)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) == 2 && len(logs) >= 1
	}, 10*time.Second, 20*time.Millisecond)
	mu.Lock()
	require.Equal(t, "agent-tok", progress[0].ProgressToken)
	require.Equal(t, 2.0, progress[1].Progress)
	require.EqualValues(t, "warning", logs[0].Level)
	mu.Unlock()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
	require.NoError(t, err)
	require.Nil(t, <-up.progress, "no token asked, none sent")

	// Cancellation: the agent gives up, the upstream's handler is told.
	cctx, ccancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "block"})
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	ccancel()
	require.Error(t, <-errc)
	select {
	case <-up.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never saw the cancellation")
	}

	// Subscriptions and list changes reach the agent.
	require.NoError(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///doc1.txt"}))
	require.NoError(t, up.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///doc1.txt"}))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(updated) == 1 && updated[0] == "file:///doc1.txt"
	}, 10*time.Second, 20*time.Millisecond)
	up.server.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	up.server.AddResource(&mcp.Resource{URI: "file:///late.txt", Name: "late"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	up.server.AddPrompt(&mcp.Prompt{Name: "late"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
	for name, ch := range map[string]chan struct{}{"tools": toolsChanged, "resources": resourcesChanged, "prompts": promptsChanged} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no notifications/%s/list_changed reached the agent", name)
		}
	}
	names = nil
	for tl, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err)
		names = append(names, tl.Name)
	}
	require.Contains(t, names, "late")
	require.NotContains(t, names, "commitlayer-gateway-placeholder")
	uris = nil
	for r, err := range cs.Resources(ctx, nil) {
		require.NoError(t, err)
		uris = append(uris, r.URI)
	}
	require.Contains(t, uris, "file:///late.txt")
	require.NotContains(t, uris, "commitlayer-gateway:placeholder")

	actions, _ := rec.recorded()
	require.Empty(t, actions, "nothing here is bound")
}
