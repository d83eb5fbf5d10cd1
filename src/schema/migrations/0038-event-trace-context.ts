/**
 * Tracing (decision 0052): an event keeps the W3C trace context of the write that appended it
 * (`traceparent`, `tracestate`), so the worker's attempts continue the writer's trace and every
 * webhook and broker message carries it to the receiver. Null when the write was not traced (tracing
 * off, the default). Nullable columns without a default: adding them rewrites no row.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(db, 'ALTER TABLE events ADD COLUMN trace_parent text, ADD COLUMN trace_state text;');
}
