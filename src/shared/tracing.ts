/**
 * Tracing (decision 0052): OpenTelemetry spans from the admin write through the event, the worker's
 * claim and the attempt to the receiver. Off unless an OTLP endpoint is configured
 * (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`): then bin/store-api.js
 * starts the SDK (ops/tracing-sdk.ts) before the application's modules load. Everything here goes
 * through `@opentelemetry/api`, whose calls are no-ops while no SDK is registered, so the default
 * costs a property read per call and loads no SDK code.
 */
import {
  context,
  propagation,
  trace,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  SpanStatusCode,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type SpanOptions,
} from '@opentelemetry/api';

/** The tracer of the service's own spans (claims, attempts, embedded statements). */
const TRACER_NAME = 'store-api';

/** True when the environment asks for traces: an OTLP endpoint is set and the SDK is not disabled. */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim().toLowerCase());
  if (exporters.includes('none') && exporters.length === 1) return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/** What the running SDK gives the rest of the process (set by tracing-sdk.ts once it started). */
export interface ActiveTracing {
  /** The Fastify plugin of `@fastify/otel` (request spans with `http.route`, the incoming context extracted). */
  readonly fastifyPlugin: () => unknown;
  /** Exports the spans still buffered and stops the SDK. Never throws. */
  shutdown(): Promise<void>;
}

let active: ActiveTracing | undefined;

/** Records the started SDK (tracing-sdk.ts). */
export function setActiveTracing(tracing: ActiveTracing | undefined): void {
  active = tracing;
}

/** The started SDK, or undefined when tracing is off. */
export function activeTracing(): ActiveTracing | undefined {
  return active;
}

/** Starts a span of the service's own tracer, `fn` running with it active; the span ends when `fn` settles. */
export async function inSpan<T>(name: string, options: SpanOptions & { parent?: Context }, fn: (span: Span) => Promise<T>): Promise<T> {
  if (!active) return fn(trace.wrapSpanContext(INVALID_SPAN_CONTEXT));
  const { parent = context.active(), ...spanOptions } = options;
  const span = trace.getTracer(TRACER_NAME).startSpan(name, spanOptions, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    span.end();
  }
}

/**
 * Records a span of work that began at `startedAt` and is over (a root span: its own trace), and
 * returns its context for links; undefined when tracing is off.
 */
export function finishedSpan(name: string, startedAt: Date, attributes: Attributes): SpanContext | undefined {
  if (!active) return undefined;
  const span = trace.getTracer(TRACER_NAME).startSpan(name, { startTime: startedAt, attributes, root: true });
  span.end();
  return span.spanContext();
}

/** The W3C trace context of the active span (`traceparent`, `tracestate`), or nulls when none is active or tracing is off. */
export function currentTraceContext(ctx: Context = context.active()): { traceparent: string | null; tracestate: string | null } {
  if (!active || !trace.getSpan(ctx)) return { traceparent: null, tracestate: null };
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return { traceparent: carrier.traceparent ?? null, tracestate: carrier.tracestate ?? null };
}

/** The context a stored `traceparent`/`tracestate` pair describes (the root context when `traceparent` is null). */
export function storedTraceContext(traceparent: string | null, tracestate: string | null): Context {
  if (!traceparent) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent };
  if (tracestate) carrier.tracestate = tracestate;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** Adds the active span's `traceparent` (and `tracestate`) to `headers`: a webhook's or a broker message's. */
export function injectTraceHeaders(headers: Record<string, string>, ctx: Context = context.active()): void {
  if (active) propagation.inject(ctx, headers);
}

/** `trace_id` and `span_id` of the active span, for log lines (pino's mixin); empty when none is active. */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
