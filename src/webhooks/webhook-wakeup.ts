/**
 * Waking workers sooner than their poll interval. In-process (the `all` role, tests): an event
 * emitter. Across processes on PostgreSQL: NOTIFY on `webhook_deliveries` (admin actions that make
 * deliveries due) and `store_events` (sent by a trigger whenever events are appended), which the
 * worker LISTENs to. PGlite has one process, so the emitter is all it needs; new events wake the
 * poller through `writeCommits` (db/write-clock.ts), emitted after every write commits.
 */
import { EventEmitter } from 'node:events';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { activeRequestTransaction } from '../db/request-transaction.ts';

/** Channel of the trigger on `events` (migration 0002-webhooks). */
export const EVENTS_CHANNEL = 'store_events';
/** Channel announcing deliveries made due by hand (ping, retry, replay). */
export const DELIVERIES_CHANNEL = 'webhook_deliveries';

/**
 * In-process signals: 'deliveries' when deliveries became due; 'endpoint-changed' (endpoint id)
 * when an endpoint's URL changed, it was disabled or deleted (its broker connection closes; workers
 * in other processes find out within their reconcile interval); 'endpoint-ready' (URL) when an
 * enabled endpoint was created or given a URL or enabled (its transport is loaded).
 */
export const localWakeups = new EventEmitter();
localWakeups.setMaxListeners(0);

/** Tells every worker that deliveries are due now. */
export async function announceDueDeliveries(db: Kysely<Database>, backend: 'pglite' | 'postgres'): Promise<void> {
  // Inside an admin write's request transaction the deliveries are visible once it commits (a
  // NOTIFY is held until then by the server; the local signal waits for the same moment).
  const request = activeRequestTransaction();
  if (request) request.afterCommit(() => localWakeups.emit('deliveries'));
  else localWakeups.emit('deliveries');
  if (backend === 'postgres') await sql`SELECT pg_notify(${DELIVERIES_CHANNEL}, '')`.execute(db);
}

/**
 * Tells this process's workers that an enabled endpoint of `url` was created or given that URL, so
 * they load its transport before its first delivery ('endpoint-ready'; decision 0048).
 */
export function announceEndpointReady(url: string): void {
  localWakeups.emit('endpoint-ready', url);
}

/** Tells this process's workers that endpoint `id` changed or is gone. */
export function announceEndpointChanged(id: string): void {
  localWakeups.emit('endpoint-changed', id);
}
