// The OpenTelemetry setup every script shares: a NodeTracerProvider whose
// batch processor exports to the endpoint and with the headers of the
// standard variables (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_EXPORTER_OTLP_HEADERS), in protobuf or JSON (PROTOCOL).
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JSONExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';

export function tracing() {
  const exporter = process.env.PROTOCOL === 'json' ? new JSONExporter() : new ProtoExporter();
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'shop-service' }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  provider.register();
  return provider;
}

// The agent's calls: an unbound lookup, a credit the ledger will show, a
// phantom one it never will, and one whose tool throws.
const P = process.env.ORDER_PREFIX;
export const calls = [
  { id: 'call_1', name: 'lookup_order', args: { order_id: `${P}_real` } },
  { id: 'call_2', name: 'grant_store_credit', args: { order_id: `${P}_real`, amount: 500 } },
  { id: 'call_3', name: 'grant_store_credit', args: { order_id: `${P}_phantom`, amount: 700 } },
  { id: 'call_4', name: 'grant_store_credit', args: { order_id: `${P}_fail`, amount: 900 } },
];

export async function grantStoreCredit({ order_id, amount }) {
  if (order_id.endsWith('_fail')) throw new Error('ledger refused the credit');
  return { credit_id: 'cr_' + order_id, amount };
}

export async function lookupOrder({ order_id }) {
  return { order_id, status: 'delivered' };
}
