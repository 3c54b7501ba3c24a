package mcpgw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/mcpgw"
)

// The gateway checked with the official TypeScript MCP SDK, an SDK nobody
// here wrote: its client as the agent, its server as the upstream.

const tsSDK = "@modelcontextprotocol/sdk@1.32.2"

var (
	tsOnce sync.Once
	tsDir  string
	tsErr  error
)

// tsModules installs the TypeScript SDK into a temporary directory once
// per test process; the test is skipped, saying why, without npm.
func tsModules(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the TypeScript SDK checks are skipped")
	}
	tsOnce.Do(func() {
		tsDir, tsErr = os.MkdirTemp("", "mcpgw-tssdk-")
		if tsErr != nil {
			return
		}
		for name, src := range map[string]string{"upstream.mjs": tsUpstream, "client.mjs": tsClient,
			"package.json": `{"name":"mcpgw-tssdk","private":true,"type":"module"}`} {
			if tsErr = os.WriteFile(filepath.Join(tsDir, name), []byte(src), 0o644); tsErr != nil {
				return
			}
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--silent", tsSDK)
		cmd.Dir = tsDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			tsErr = fmt.Errorf("npm install %s: %w: %s", tsSDK, err, out)
		}
	})
	require.NoError(t, tsErr)
	return tsDir
}

// tsUpstream is an MCP server on the TypeScript SDK (Streamable HTTP,
// stateful) whose tools carry every field of protocol 2025-11-25.
const tsUpstream = `
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ListToolsRequestSchema, CallToolRequestSchema, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema,
  ReadResourceRequestSchema, ListPromptsRequestSchema, GetPromptRequestSchema, CompleteRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const tools = [
  { name: 'zeta_lookup', title: 'Zeta', description: 'first in the list, last by name',
    inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
    outputSchema: { type: 'object', properties: { n: { type: 'integer' } } },
    annotations: { title: 'Zeta lookup', readOnlyHint: true, openWorldHint: false },
    icons: [{ src: 'https://example.com/z.png', mimeType: 'image/png', sizes: ['48x48'], theme: 'dark' }],
    execution: { taskSupport: 'optional' }, _meta: { 'vendor/x': 1 } },
  { name: 'refund', description: 'refund an order', inputSchema: { type: 'object', properties: { order_id: { type: 'string' }, amount: { type: 'integer' } } },
    annotations: { destructiveHint: true }, execution: { taskSupport: 'forbidden' } },
  { name: 'alpha', inputSchema: { type: 'object' } },
];
const flaky = new Map();

function newServer() {
  const s = new Server({ name: 'ts-upstream', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true }, resources: {}, prompts: {}, completions: {} }, instructions: 'a TypeScript upstream' });
  s.setRequestHandler(ListToolsRequestSchema, async (req) => {
    const at = Number(req.params?.cursor ?? 0);
    const page = { tools: tools.slice(at, at + 2) };
    if (at + 2 < tools.length) page.nextCursor = String(at + 2);
    return page;
  });
  s.setRequestHandler(CallToolRequestSchema, async (req) => {
    const a = req.params.arguments ?? {};
    if (req.params.name === 'zeta_lookup') {
      return { content: [{ type: 'text', text: '{"n":7}' }, { type: 'image', data: 'AQID', mimeType: 'image/png' },
        { type: 'resource_link', uri: 'file:///z.txt', name: 'z', mimeType: 'text/plain' }],
        structuredContent: { n: 7 }, _meta: { trace: 't-ts' } };
    }
    if (req.params.name === 'refund') {
      const seen = flaky.get(a.order_id) ?? 0;
      flaky.set(a.order_id, seen + 1);
      if (a.order_id.startsWith('flaky') && seen === 0) return { content: [{ type: 'text', text: 'timeout' }], isError: true };
      return { content: [{ type: 'text', text: JSON.stringify({ refund_id: 're_' + a.order_id, status: 'succeeded' }) }] };
    }
    return { content: [] };
  });
  s.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: [
    { uri: 'file:///b.txt', name: 'b', title: 'B', mimeType: 'text/plain', size: 2, annotations: { audience: ['user'], priority: 0.5 } },
    { uri: 'file:///a.txt', name: 'a' }] }));
  s.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: [{ uriTemplate: 'orders://{id}', name: 'order', title: 'Order' }] }));
  s.setRequestHandler(ReadResourceRequestSchema, async (req) => ({ contents: [{ uri: req.params.uri, mimeType: 'text/plain', text: 'body of ' + req.params.uri }] }));
  s.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: [{ name: 'greet', title: 'Greet', arguments: [{ name: 'who', required: true }] }] }));
  s.setRequestHandler(GetPromptRequestSchema, async (req) => ({ description: 'd', messages: [{ role: 'user', content: { type: 'text', text: 'hello ' + req.params.arguments?.who } }] }));
  s.setRequestHandler(CompleteRequestSchema, async () => ({ completion: { values: ['ada', 'adam'], total: 2, hasMore: false } }));
  return s;
}

const transports = {};
const server = http.createServer(async (req, res) => {
  let body;
  if (req.method === 'POST') {
    let raw = '';
    for await (const c of req) raw += c;
    body = JSON.parse(raw);
  }
  const sid = req.headers['mcp-session-id'];
  let t = sid ? transports[sid] : undefined;
  if (!t) {
    t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => { transports[id] = t; } });
    await newServer().connect(t);
  }
  await t.handleRequest(req, res, body);
});
server.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + server.address().port + '/mcp'));
`

// tsClient is an agent on the TypeScript SDK's client: it lists and calls
// everything on the server at argv[2] and prints what it got as JSON.
const tsClient = `
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
const client = new Client({ name: 'ts-agent', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
const out = { instructions: client.getInstructions(), capabilities: client.getServerCapabilities(), tools: [] };
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  out.tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);
out.zeta = await client.callTool({ name: 'zeta_lookup', arguments: { q: 'x' } });
out.flaky = [await client.callTool({ name: 'refund', arguments: { order_id: 'flaky-' + process.argv[3], amount: 5, currency: 'EUR' } }),
  await client.callTool({ name: 'refund', arguments: { order_id: 'flaky-' + process.argv[3], amount: 5, currency: 'EUR' } })];
out.resources = await client.listResources();
out.templates = await client.listResourceTemplates();
out.read = await client.readResource({ uri: 'file:///b.txt' });
out.prompts = await client.listPrompts();
out.prompt = await client.getPrompt({ name: 'greet', arguments: { who: 'ada' } });
out.complete = await client.complete({ ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'who', value: 'a' } });
console.log(JSON.stringify(out));
await client.close();
`

// startTSUpstream runs tsUpstream and returns its URL.
func startTSUpstream(t *testing.T, dir string) string {
	cmd := exec.Command("node", "upstream.mjs")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return strings.TrimSpace(url)
}

// runTSClient runs tsClient against url and returns what it printed.
func runTSClient(t *testing.T, dir, url, run string) map[string]any {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", url, run)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m), "%s", out)
	return m
}

// TestTypeScriptSDK: the TypeScript SDK's client sees through the gateway
// what it sees on the TypeScript upstream directly — every field of the
// tools (execution, icons, annotations as sent, in the upstream's order),
// results, resources, prompts, completions — and the Go SDK's client
// agrees. A retried call that succeeds is one action claiming success.
func TestTypeScriptSDK(t *testing.T) {
	dir := tsModules(t)
	up := startTSUpstream(t, dir)
	rec := newFakeRecorder(t)
	g := newGateway(t, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{URL: up}}, io.Discard)
	gw := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(gw.Close)

	direct := runTSClient(t, dir, up, "direct")
	through := runTSClient(t, dir, gw.URL, "gateway")
	caps, flakyRuns := through["capabilities"], through["flaky"].([]any)
	for _, m := range []map[string]any{direct, through} {
		delete(m, "capabilities")
		delete(m, "flaky") // another order on each side
	}
	require.Equal(t, direct, through, "the TypeScript client sees the upstream as it is")
	require.Equal(t, true, flakyRuns[0].(map[string]any)["isError"])
	require.NotContains(t, flakyRuns[1].(map[string]any), "isError")
	require.NotNil(t, caps)
	tools := through["tools"].([]any)
	require.Len(t, tools, 3)
	zeta := tools[0].(map[string]any)
	require.Equal(t, "zeta_lookup", zeta["name"], "the upstream's order")
	require.Equal(t, map[string]any{"taskSupport": "optional"}, zeta["execution"])
	require.Equal(t, map[string]any{"title": "Zeta lookup", "readOnlyHint": true, "openWorldHint": false}, zeta["annotations"],
		"no hint the upstream did not send")
	require.NotContains(t, tools[2].(map[string]any), "annotations")

	// The retried call: one action, claiming the last attempt's success.
	actions, _ := rec.recorded()
	var flaky []commitlayer.Action
	for _, a := range actions {
		if a.Subject == "order:flaky-gateway" && a.Params["amount"] != nil {
			flaky = append(flaky, a)
		}
	}
	require.Len(t, flaky, 1)
	require.Equal(t, commitlayer.ClaimSuccess, flaky[0].Claim.Status)

	// The Go SDK's client, through the gateway and directly, agrees.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	view := func(url string) []any {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-agent", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		require.NoError(t, err)
		defer cs.Close()
		var out []any
		for tl, err := range cs.Tools(ctx, nil) {
			require.NoError(t, err)
			out = append(out, tl)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "zeta_lookup", Arguments: map[string]any{"q": "x"}})
		require.NoError(t, err)
		rs, err := cs.ListResources(ctx, nil)
		require.NoError(t, err)
		pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ada"}})
		require.NoError(t, err)
		return append(out, res, rs, pr)
	}
	require.Equal(t, view(up), view(gw.URL))
}
