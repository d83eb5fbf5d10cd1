/**
 * Starts OpenTelemetry's Node SDK (decision 0052), loaded by bin/store-api.js only when
 * shared/tracing.ts `tracingRequested()`: before the application's modules, so the pg, ioredis and
 * undici instrumentations patch them as they load (the loader hook of `@opentelemetry/instrumentation`
 * sees the ES module imports). The exporter, its protocol (`OTEL_EXPORTER_OTLP_PROTOCOL`:
 * `http/protobuf` by default, `http/json`, `grpc`), the sampler and the resource come from the
 * standard `OTEL_*` variables, read by the SDK itself. Metrics stay on `/metrics` and logs on
 * stdout: the SDK's own metric and log exporters are off unless `OTEL_METRICS_EXPORTER` /
 * `OTEL_LOGS_EXPORTER` ask for them.
 */
import { register } from 'node:module';
import { setActiveTracing, tracingRequested } from '../shared/tracing.ts';

/** Requests whose spans would be noise: probes and scrapes. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/** Starts the SDK and records it (shared/tracing.ts `activeTracing`), when the environment asks for traces. */
export async function startTracing(version: string): Promise<void> {
  if (!tracingRequested()) return;
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  process.env.OTEL_METRICS_EXPORTER ??= 'none';
  process.env.OTEL_LOGS_EXPORTER ??= 'none';
  process.env.OTEL_SERVICE_NAME ??= 'store-api';
  const [{ NodeSDK }, { PgInstrumentation }, { IORedisInstrumentation }, { UndiciInstrumentation }, { default: FastifyOtel }, { resourceFromAttributes }] =
    await Promise.all([
      import('@opentelemetry/sdk-node'),
      import('@opentelemetry/instrumentation-pg'),
      import('@opentelemetry/instrumentation-ioredis'),
      import('@opentelemetry/instrumentation-undici'),
      import('@fastify/otel'),
      import('@opentelemetry/resources'),
    ]);
  const fastifyOtel = new FastifyOtel.FastifyOtelInstrumentation({
    // One span per request and one for its handler; a span per hook would cost more than it tells.
    instrumentHooks: false,
    ignorePaths: ({ url }) => UNTRACED_PATHS.has(url),
    requestHook: (span, request) => {
      // url.path as logged: without the query string (a setup link's token travels there).
      span.setAttribute('url.path', request.url.split('?')[0]!);
    },
  });
  const sdk = new NodeSDK({
    resource: resourceFromAttributes({ 'service.version': version }),
    instrumentations: [
      // Statements of a request, a claim or an attempt; the pool's own and LISTEN's would be root spans of their own.
      // The instrumentation names its attributes by the stable database conventions (db.system.name,
      // db.query.text); the names collectors and backends of the older conventions look for
      // (db.system, db.statement) are added alongside, as the embedded database's spans carry both.
      new PgInstrumentation({
        requireParentSpan: true,
        requestHook: (span, { query }) => span.setAttributes({ 'db.system': 'postgresql', 'db.statement': query.text }),
      }),
      new IORedisInstrumentation({ requireParentSpan: true }),
      // A webhook attempt is its own client span (its traceparent set by the worker): not a second one.
      new UndiciInstrumentation({ ignoreRequestHook: (request) => hasTraceparent(request.headers) }),
      fastifyOtel,
    ],
  });
  sdk.start();
  setActiveTracing({
    fastifyPlugin: () => fastifyOtel.plugin(),
    shutdown: async () => {
      try {
        await sdk.shutdown();
      } catch {
        // An unreachable collector at shutdown loses the last spans, never the exit.
      }
    },
  });
}

/** True when undici's request headers (a `k: v\r\n` string or a flat array) already carry a traceparent. */
function hasTraceparent(headers: string | readonly (string | Buffer)[] | unknown): boolean {
  if (typeof headers === 'string') return /(^|\r\n)traceparent:/i.test(headers);
  if (Array.isArray(headers)) return headers.some((h, i) => i % 2 === 0 && String(h).toLowerCase() === 'traceparent');
  return false;
}
