/**
 * Tracing from outside (decision 0052): `store-api all` started with an OTLP endpoint (an OTLP/HTTP
 * receiver run here on loopback) and a webhook receiver. An admin write that carries a W3C
 * traceparent is answered with a traceparent of the same trace; the webhook of its event reaches the
 * receiver with that trace id; the spans arrive at the collector with their names, attributes
 * (`http.route`, `db.system`, the endpoint and delivery ids), parents and links, and no attribute
 * holds a token or a signing secret; the log lines written inside a span name it. Both OTLP/HTTP
 * encodings: JSON is decoded and checked in full, protobuf is checked to arrive (its bytes carry the
 * span names and the trace id). Without an endpoint, nothing is sent and the answer has no traceparent.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { listeningUrl, storeForProcesses } from './process-helpers.ts';
import { WebhookReceiver } from '../webhooks/webhook-receiver.ts';

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: OtlpValue }[];
  links?: { traceId: string; spanId: string }[];
}

/** An OTLP/HTTP collector on loopback: keeps what each POST /v1/traces carried. */
class OtlpReceiver {
  readonly bodies: { contentType: string; body: Buffer }[] = [];
  readonly #server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') this.bodies.push({ contentType: String(req.headers['content-type']), body: Buffer.concat(chunks) });
      const json = String(req.headers['content-type']).includes('json');
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(json ? '{}' : '');
    });
  });

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Every span received as OTLP/JSON so far. */
  spans(): OtlpSpan[] {
    return this.bodies
      .filter((b) => b.contentType.includes('json'))
      .flatMap((b) => (JSON.parse(b.body.toString()) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans)
      .flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

const attribute = (span: OtlpSpan, key: string): string | undefined => {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (!value) return undefined;
  return String(value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue);
};

/** Fast worker schedules: the event is fanned out and sent within a poll interval of its write. */
const FAST = { WEBHOOK_POLL_INTERVAL_MS: '50', WEBHOOK_ALLOW_PRIVATE_URLS: 'true', OTEL_BSP_SCHEDULE_DELAY: '100', LOG_LEVEL: 'info' };

describe.each(backends)('tracing (%s)', (backend) => {
  const store = storeForProcesses(backend, 'tracing', async (db) => (await createToken(db, { name: 'traced', scopes: ['admin'] })).token);
  let collector: OtlpReceiver;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    collector = await new OtlpReceiver().start();
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await collector?.close();
    await receiver?.close();
  });

  it('one trace from the admin write through the event and the attempt to the receiver, exported as OTLP/JSON', async () => {
    const proc = store.start(['all'], { ...FAST, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    onTestFinished(() => void proc.stop('SIGKILL'));
    const base = await listeningUrl(proc);
    const key = store.prepared;
    const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      fetch(`${base}/admin/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });

    const endpoint = await call('POST', '/webhooks/endpoints', { url: receiver.url, event_types: ['product.created'] });
    expect(endpoint.status).toBe(201);
    const { id: endpointId, secret } = ((await endpoint.json()) as { data: { id: string; secret: string } }).data;

    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/metrics`)).status).toBe(200);
    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    const written = await call(
      'POST',
      '/products',
      { name: 'Traced', product_type: 'physical', sku: `TR-${traceId.slice(0, 8)}`, price: 5, stock: 1 },
      {
        traceparent: `00-${traceId}-${callerSpan}-01`,
      },
    );
    expect(written.status, proc.output()).toBe(201);
    // The answer continues the caller's trace.
    expect(written.headers.get('traceparent')).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const productId = ((await written.json()) as { data: { id: string } }).data.id;

    // The webhook of the write's event carries the writer's trace id.
    const [delivered] = await receiver.waitForRequests(1, 30_000);
    expect(delivered!.json.data.id).toBe(productId);
    expect(delivered!.headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));

    // The spans reach the collector: the request, its statements, the attempt (child of the
    // writer's trace, linked to the worker's claim) and the claim with its statements.
    let attempt: OtlpSpan | undefined;
    await vi.waitFor(
      () => {
        attempt = collector.spans().find((s) => s.name === 'webhook attempt' && s.traceId === traceId);
        expect(attempt).toBeDefined();
      },
      { timeout: 30_000, interval: 100 },
    );
    const spans = collector.spans();
    const trace = spans.filter((s) => s.traceId === traceId);
    const request = trace.find((s) => s.name === 'request' && attribute(s, 'http.route') === '/admin/api/v1/products');
    expect(request, JSON.stringify(trace.map((s) => s.name))).toBeDefined();
    expect(request!.parentSpanId).toBe(callerSpan);
    const statements = trace.filter((s) => attribute(s, 'db.system') === 'postgresql');
    expect(statements.length).toBeGreaterThan(0);
    expect(statements.some((s) => /INSERT INTO events/.test(attribute(s, 'db.statement') ?? ''))).toBe(true);

    expect(attribute(attempt!, 'store_api.endpoint.id')).toBe(endpointId);
    expect(attribute(attempt!, 'store_api.delivery.id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(attribute(attempt!, 'store_api.event.type')).toBe('product.created');
    expect(attribute(attempt!, 'http.response.status_code')).toBe('200');
    // The receiver's traceparent is the attempt's own span.
    expect(delivered!.headers.traceparent).toBe(`00-${traceId}-${attempt!.spanId}-01`);
    // The attempt continues the span the event was written in (inside the request's trace).
    expect(trace.some((s) => s.spanId === attempt!.parentSpanId)).toBe(true);
    const claimLink = attempt!.links?.[0];
    expect(claimLink).toBeDefined();
    // The worker took the delivery in its poll's fan-out (handed over) or in a claim.
    const claim = spans.find((s) => s.spanId === claimLink!.spanId);
    expect(['webhook poll', 'webhook claim']).toContain(claim?.name);
    expect(Number(attribute(claim!, 'store_api.poll.deliveries') ?? attribute(claim!, 'store_api.claim.deliveries'))).toBeGreaterThan(0);

    // No attribute anywhere carries the key or the signing secret.
    const everything = collector.bodies.map((b) => b.body.toString()).join('\n');
    expect(everything).not.toContain(key);
    expect(everything).not.toContain(key.slice(0, 12));
    expect(everything).not.toContain(secret);
    // Probes and scrapes are not traced (asked before the write: their spans would have been exported by now).
    expect(spans.some((s) => ['/healthz', '/metrics'].includes(attribute(s, 'url.path') ?? ''))).toBe(false);

    // A log line written inside the request names the trace.
    const lines = proc
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { trace_id?: string; span_id?: string });
    expect(lines.some((l) => l.trace_id === traceId && /^[0-9a-f]{16}$/.test(l.span_id ?? ''))).toBe(true);
    expect(await proc.stop()).toBe(0);
  });

  it('exports OTLP/protobuf by default, and sends nothing without an endpoint', async () => {
    const before = collector.bodies.length;
    const proc = store.start(['all'], { ...FAST, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
    onTestFinished(() => void proc.stop('SIGKILL'));
    const base = await listeningUrl(proc);
    const traceId = randomBytes(16).toString('hex');
    const read = await fetch(`${base}/admin/api/v1/webhooks/endpoints`, {
      headers: { authorization: `Bearer ${store.prepared}`, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
    });
    expect(read.status).toBe(200);
    expect(read.headers.get('traceparent')).toContain(traceId);
    // Stopping flushes what is buffered.
    expect(await proc.stop()).toBe(0);
    const sent = collector.bodies.slice(before);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.every((b) => b.contentType === 'application/x-protobuf')).toBe(true);
    const bytes = Buffer.concat(sent.map((b) => b.body));
    expect(bytes.includes(Buffer.from(traceId, 'hex'))).toBe(true);
    expect(bytes.includes(Buffer.from('/admin/api/v1/webhooks/endpoints'))).toBe(true);

    const quiet = store.start(['all'], FAST);
    onTestFinished(() => void quiet.stop('SIGKILL'));
    const quietBase = await listeningUrl(quiet);
    const answer = await fetch(`${quietBase}/admin/api/v1/webhooks/endpoints`, {
      headers: { authorization: `Bearer ${store.prepared}`, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('traceparent')).toBeNull();
    const count = collector.bodies.length;
    expect(await quiet.stop()).toBe(0);
    expect(collector.bodies.length).toBe(count);
    expect(quiet.output()).not.toContain('trace_id');
  });
});
