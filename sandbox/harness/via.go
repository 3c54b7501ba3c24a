package harness

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
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
// ingest (docs/recording.md) instead of the harness: toolServer serves the
// tools as an MCP server, exportToolCalls sends a run's tool calls as
// OpenTelemetry GenAI spans with the SDK's OTLP/HTTP exporter. Either way
// the sandbox contracts' bindings turn the process's write into the action.

// toolServer serves the sandbox agent's tools (agent.ModelTools, the
// schemas a model sees) as an MCP server acting through c. Each call's
// result is what the model-driven agent sees ({"status":…,"body":…} or
// {"error":…}), isError when the call did not get a 2xx; arguments the tool
// layer refuses are answered 400 as a tool server would. made, when set, is
// told each attempt as the model-driven agent records it.
func toolServer(c *agent.Client, made func(llm.Attempt)) *mcp.Server {
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
				at := agent.Attempt(call, err)
				at.Attempt = 0 // the conversation numbers attempts
				if made != nil {
					made(at)
				}
				out := at.Outcome()
				return &mcp.CallToolResult{IsError: !out.OK(), Content: []mcp.Content{&mcp.TextContent{Text: out.Content()}}}, nil
			})
	}
	return s
}

// ServiceName is the service.name of the spans exportToolCalls sends.
const ServiceName = "commitlayer-sandbox-agent"

// exportToolCalls sends calls as one trace to an OTLP/HTTP endpoint
// (CommitLayer's POST /v1/traces) with the OpenTelemetry SDK's exporter and
// the tenant key as bearer: an invoke_agent span for the agent, and under
// it an execute_tool span per call with gen_ai.tool.name, the arguments
// and the result (what the model saw), status Error and error.type for a
// call that did not get a 2xx. The first call starts at start, each next a
// millisecond later. All spans go in one export (the batcher, flushed on
// shutdown), so the ingest finds each call's invoke_agent parent. The trace
// and span ids come from ids (nil: the SDK's random ones). Ids that are the same on every export of
// the same calls make a repeated export (a retried activity) one the
// ingest has recorded already.
func exportToolCalls(ctx context.Context, endpoint, key, agentName string, calls []llm.Attempt, start time.Time, ids sdktrace.IDGenerator) error {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimRight(endpoint, "/")+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		return fmt.Errorf("export tool calls: exporter: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", ServiceName)))}
	if ids != nil {
		opts = append(opts, sdktrace.WithIDGenerator(ids))
	}
	tp := sdktrace.NewTracerProvider(opts...)
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

// seqIDs gives one trace id (the seed's first 16 bytes) and span ids
// counting up from the seed's last 8: the same spans in the same order get
// the same ids on every export.
type seqIDs struct {
	mu    sync.Mutex
	trace trace.TraceID
	next  uint64
}

func newSeqIDs(seed [32]byte) *seqIDs {
	s := &seqIDs{next: binary.BigEndian.Uint64(seed[24:]) | 1}
	copy(s.trace[:], seed[:16])
	return s
}

func (s *seqIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return s.trace, s.span()
}

func (s *seqIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return s.span() }

func (s *seqIDs) span() trace.SpanID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], s.next)
	s.next++
	if s.next == 0 {
		s.next = 1
	}
	return id
}
