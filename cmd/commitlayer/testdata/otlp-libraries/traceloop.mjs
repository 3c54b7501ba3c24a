// OpenLLMetry's node SDK, set up as its docs say: TRACELOOP_BASE_URL and
// TRACELOOP_API_KEY (sent as Authorization: Bearer).
import * as traceloop from '@traceloop/node-server-sdk';
import { calls, grantStoreCredit, lookupOrder } from './otel.mjs';

traceloop.initialize({ appName: 'shop-service', traceloopSyncEnabled: false, silenceInitializationMessage: true });
await traceloop.withWorkflow({ name: 'support' }, () => traceloop.withAgent({ name: 'support-agent' }, async () => {
  for (const c of calls) {
    const fn = c.name === 'lookup_order' ? lookupOrder : grantStoreCredit;
    try { await traceloop.withTool({ name: c.name }, fn, c.args); } catch { /* the agent goes on */ }
  }
}));
await traceloop.forceFlush();
