// The OpenAI Agents SDK with a scripted model, through the OpenInference
// bridge.
import { OpenAIAgentsInstrumentation } from '@arizeai/openinference-instrumentation-openai-agents';
import * as agents from '@openai/agents';
import { z } from 'zod';
import { tracing, calls, grantStoreCredit, lookupOrder } from './otel.mjs';

const provider = tracing();
new OpenAIAgentsInstrumentation({ tracerProvider: provider }).manuallyInstrument(agents);
let step = 0;
const model = {
  async getResponse() {
    const usage = new agents.Usage();
    if (step++ === 0) {
      return { usage, responseId: 'r1', output: calls.map((c) => ({ type: 'function_call', id: 'fc_' + c.id, callId: c.id, name: c.name,
        arguments: JSON.stringify(c.args), status: 'completed' })) };
    }
    return { usage, responseId: 'r2', output: [{ type: 'message', id: 'm', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] };
  },
  async *getStreamedResponse() { throw new Error('not streamed'); },
};
const agent = new agents.Agent({
  name: 'support-agent', instructions: 'grant credits', model,
  tools: [
    agents.tool({ name: 'lookup_order', description: 'looks an order up', parameters: z.object({ order_id: z.string() }), execute: lookupOrder }),
    agents.tool({ name: 'grant_store_credit', description: 'grants store credit', parameters: z.object({ order_id: z.string(), amount: z.number() }),
      execute: grantStoreCredit }),
  ],
});
await agents.run(agent, 'grant the credits');
await provider.forceFlush();
await provider.shutdown();
