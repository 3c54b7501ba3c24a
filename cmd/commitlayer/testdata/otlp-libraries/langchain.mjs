// LangChain.js createAgent with the fake model, instrumented by
// OpenInference.
import { LangChainInstrumentation } from '@arizeai/openinference-instrumentation-langchain';
import * as CallbackManagerModule from '@langchain/core/callbacks/manager';
import { tracing, calls, grantStoreCredit, lookupOrder } from './otel.mjs';

const provider = tracing();
new LangChainInstrumentation().manuallyInstrument(CallbackManagerModule);
const { tool } = await import('@langchain/core/tools');
const { fakeModel } = await import('@langchain/core/testing');
const { AIMessage, HumanMessage } = await import('@langchain/core/messages');
const { createAgent } = await import('langchain');
const { z } = await import('zod');

const tools = [
  tool(async (a) => JSON.stringify(await lookupOrder(a)), { name: 'lookup_order', description: 'looks an order up', schema: z.object({ order_id: z.string() }) }),
  tool(async (a) => JSON.stringify(await grantStoreCredit(a)), { name: 'grant_store_credit', description: 'grants store credit',
    schema: z.object({ order_id: z.string(), amount: z.number() }) }),
];
const model = fakeModel().respondWithTools(calls.map((c) => ({ name: c.name, args: c.args, id: c.id }))).respond(new AIMessage('done'));
const agent = createAgent({ model, tools, name: 'support-agent' });
await agent.invoke({ messages: [new HumanMessage('grant the credits')] });
await provider.shutdown();
