/**
 * Status of a mirror: the last event received, each resource's records, initial-sync progress,
 * reconcile cursor and last reconcile, and the lag (how old the newest change the mirror knows of
 * is, by event and by cursor).
 */
import type { MirrorDatabase } from './mirror/mirror-database.ts';
import { countRecords, eventSummary, readSyncState, type EventSummary, type SyncState } from './mirror/mirror.repository.ts';
import type { SyncResource } from './sync-resources.ts';

export interface SyncStatus {
  events: EventSummary & { lastEventAgeMs: number | null };
  resources: (SyncState & { records: number; cursorAgeMs: number | null })[];
}

export async function syncStatus(mirror: MirrorDatabase, resources: readonly SyncResource[], now = Date.now()): Promise<SyncStatus> {
  const events = await eventSummary(mirror.db);
  const states = [];
  for (const resource of resources) {
    const state = await readSyncState(mirror.db, resource.name);
    const cursorTime = state.cursor ? Date.parse(state.cursor.split('_')[0]!) : NaN;
    states.push({ ...state, records: await countRecords(mirror.db, resource), cursorAgeMs: Number.isNaN(cursorTime) ? null : now - cursorTime });
  }
  const lastAt = events.last ? Date.parse(events.last.created_at) : NaN;
  return { events: { ...events, lastEventAgeMs: Number.isNaN(lastAt) ? null : now - lastAt }, resources: states };
}

/** Milliseconds as "3.2 s", "4 min", "2.5 h". */
export function formatAge(ms: number | null): string {
  if (ms === null) return '—';
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}
