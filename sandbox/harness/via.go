package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/agent"
)

// The sandbox agent's tools reached the ways agents reach tools outside
// the sandbox, so actions can come from CommitLayer's MCP gateway and trace
// ingest (docs/recording.md) instead of the harness: ToolServer serves the
// tools as an MCP server, ExportToolCalls sends a run's tool calls as
// OpenTelemetry GenAI spans with the SDK's OTLP/HTTP exporter. Either way
// the sandbox contracts' bindings turn the process's write into the action.

// ToolServer serves the sandbox agent's tools (agent.ModelTools, the
// schemas a model sees) as an MCP server acting through c. Each call's
// result is what the model-driven agent sees ({"status":…,"body":…} or
// {"error":…}), isError when the call did not get a 2xx; arguments the tool
// layer refuses are answered 400 as a tool server would.
func ToolServer(c *agent.Client) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "commitlayer-sandbox-tools", Version: "1"}, nil)
	for _, t := range agent.ModelTools() {
		name := t.Name
		s.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: t.Schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var raw json.RawMessage
				if req.Params != nil {
					raw = req.Params.Arguments
				}
				if len(raw) == 0 {
					raw = json.RawMessage(`{}`)
				}
				args, key, err := agent.ModelArgs(raw)
				call := llm.Attempt{Tool: name, Args: args}
				if err == nil {
					call, err = c.Do(ctx, name, args, key)
				}
				out := agent.Attempt(call, err).Outcome()
				return &mcp.CallToolResult{IsError: !out.OK(), Content: []mcp.Content{&mcp.TextContent{Text: out.Content()}}}, nil
			})
	}
	return s
}

// ServiceName is the service.name of the spans ExportToolCalls sends.
const ServiceName = "commitlayer-sandbox-agent"

// ExportToolCalls sends calls as one trace to an OTLP/HTTP endpoint
// (CommitLayer's POST /v1/traces) with the OpenTelemetry SDK's exporter and
// the tenant key as bearer: an invoke_agent span for the agent, and under
// it an execute_tool span per call with gen_ai.tool.name, the arguments
// and the result (what the model saw), status Error and error.type for a
// call that did not get a 2xx. The first call starts at start, each next a
// millisecond later. All spans go in one export (the batcher, flushed on
// shutdown), so the ingest finds each call's invoke_agent parent.
func ExportToolCalls(ctx context.Context, endpoint, key, agentName string, calls []llm.Attempt, start time.Time) error {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimRight(endpoint, "/")+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		return fmt.Errorf("export tool calls: exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", ServiceName))))
	tr := tp.Tracer("github.com/commitlayer/commitlayer/sandbox/harness")
	at := start
	actx, root := tr.Start(ctx, "invoke_agent "+agentName, trace.WithTimestamp(at), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", agentName)))
	for i, c := range calls {
		at = start.Add(time.Duration(i) * time.Millisecond)
		args, err := json.Marshal(c.Args)
		if err != nil {
			return fmt.Errorf("export tool calls: arguments of call %d: %w", i+1, err)
		}
		out := agent.Attempt(c, nil).Outcome()
		_, sp := tr.Start(actx, "execute_tool "+c.Tool, trace.WithTimestamp(at), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(
				attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.name", c.Tool),
				attribute.String("gen_ai.tool.call.id", fmt.Sprintf("call_%d", i+1)),
				attribute.String("gen_ai.tool.call.arguments", string(args)),
				attribute.String("gen_ai.tool.call.result", out.Content()),
			))
		if !out.OK() {
			sp.SetStatus(codes.Error, c.Failure())
			typ := "http_" + fmt.Sprint(c.Status)
			if c.Status == 0 {
				typ = "transport"
			}
			sp.SetAttributes(attribute.String("error.type", typ))
		}
		sp.End(trace.WithTimestamp(at.Add(time.Millisecond / 2)))
	}
	root.End(trace.WithTimestamp(at.Add(time.Millisecond)))
	if err := tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("export tool calls: %w", err)
	}
	return nil
}
