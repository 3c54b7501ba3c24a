// The Vercel AI SDK with its mock model: `legacy` registers
// LegacyOpenTelemetry (ai.toolCall spans), `genai` OpenTelemetry (the
// GenAI conventions).
import { generateText, tool, registerTelemetry, stepCountIs } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { LegacyOpenTelemetry, OpenTelemetry } from '@ai-sdk/otel';
import { z } from 'zod';
import { tracing, calls, grantStoreCredit, lookupOrder } from './otel.mjs';

const provider = tracing();
registerTelemetry(process.argv[2] === 'legacy' ? new LegacyOpenTelemetry() : new OpenTelemetry());
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
let step = 0;
const model = new MockLanguageModelV4({
  doGenerate: async () => (step++ === 0
    ? { content: calls.map((c) => ({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: JSON.stringify(c.args) })),
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] }
    : { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }),
});
await generateText({
  model, prompt: 'grant the credits', stopWhen: stepCountIs(3), telemetry: { functionId: 'support-agent' },
  tools: {
    lookup_order: tool({ inputSchema: z.object({ order_id: z.string() }), execute: lookupOrder }),
    grant_store_credit: tool({ inputSchema: z.object({ order_id: z.string(), amount: z.number() }), execute: grantStoreCredit }),
  },
});
await provider.shutdown();
