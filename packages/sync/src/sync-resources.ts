/**
 * The resources the mirror holds, derived from the API's own resource list (the client's
 * API_RESOURCES): where each is read from, which field is its key, which webhook events carry it,
 * and the typed columns an ERP team queries (generated from the stored JSON, so the record itself is
 * the one source of truth).
 */
import { API_RESOURCES, type ResourceName } from '@store-api/client';

export type { ResourceName };

type ColumnType = 'text' | 'numeric' | 'integer' | 'boolean' | 'jsonb';

export interface SyncResource {
  readonly name: ResourceName;
  /** Path under /api/v1 of the list; the export is `${path}/export`. */
  readonly path: string;
  /** Field holding the record's identity (inventory records are keyed by their product). */
  readonly key: 'id' | 'product_id';
  /** The read scope a token needs for it (e.g. `orders:read`; inventory and stock movements share `inventory:read`). */
  readonly scope: string;
  /** Query added to every list and export call (products: inactive ones too, a mirror needs them). */
  readonly query: Readonly<Record<string, string>>;
  /** Webhook event types whose `data` is a record of this resource. */
  readonly events: readonly string[];
  /** Typed columns generated from the record: name → SQL type (text, numeric, integer, boolean, jsonb). */
  readonly columns: Readonly<Record<string, ColumnType>>;
}

/** SQL type of a column holding a record field of each JSON type (timestamps stay text, see mirror-migrations.ts). */
const COLUMN_TYPES: Readonly<Record<string, ColumnType>> = {
  string: 'text',
  number: 'numeric',
  integer: 'integer',
  boolean: 'boolean',
  array: 'jsonb',
  object: 'jsonb',
};

/**
 * Every mirrored resource, in the order the initial sync walks them: the API's resources (the
 * client's API_RESOURCES, generated from the OpenAPI document), a typed column for every field of
 * the record but its key and last_modified (which have columns of their own).
 */
export const SYNC_RESOURCES: readonly SyncResource[] = API_RESOURCES.map((r) => syncResourceOf(r));

/** A resource as x-resources describes it (generated/resources.ts of the client), field types included. */
export interface ApiResourceEntry {
  readonly name: string;
  readonly path: string;
  readonly key: 'id' | 'product_id';
  readonly scope: string;
  readonly mirror_query: Readonly<Record<string, string>>;
  readonly events: readonly string[];
  readonly fields: Readonly<Record<string, string>>;
}

/** The mirror's view of one resource of x-resources: a typed column for every field but its key and last_modified. */
export function syncResourceOf<R extends ApiResourceEntry>(r: R): SyncResource & { name: R['name'] } {
  return {
    name: r.name as ResourceName & R['name'],
    path: r.path,
    key: r.key,
    scope: r.scope,
    query: r.mirror_query,
    events: r.events,
    columns: Object.fromEntries(
      Object.entries(r.fields)
        .filter(([field]) => field !== r.key && field !== 'last_modified')
        .map(([field, type]) => [field, COLUMN_TYPES[type] ?? 'jsonb']),
    ),
  };
}

/** The resource a webhook event type carries, or undefined (ping, unknown future types). */
export function resourceOfEvent(type: string): SyncResource | undefined {
  return SYNC_RESOURCES.find((r) => r.events.includes(type));
}

/** Resources by name; throws naming the valid ones for an unknown name (CLI `--resources`). */
export function resourcesNamed(names: readonly string[] | undefined): SyncResource[] {
  if (!names || names.length === 0) return [...SYNC_RESOURCES];
  return names.map((n) => {
    const found = SYNC_RESOURCES.find((r) => r.name === n);
    if (!found) throw new Error(`unknown resource "${n}" (one of: ${SYNC_RESOURCES.map((r) => r.name).join(', ')})`);
    return found;
  });
}

/** A mirrored record: the API's JSON object as received. */
export type MirrorRecord = Record<string, unknown> & { last_modified: string };

/** The identity of `record` in `resource`. */
export function recordKey(resource: SyncResource, record: MirrorRecord): string {
  const key = record[resource.key];
  if (typeof key !== 'string' || key === '') throw new Error(`${resource.name} record without ${resource.key}`);
  return key;
}

/** The list cursor just past `record` (`<last_modified>_<key>`, the API's next_cursor format). */
export function cursorAfter(resource: SyncResource, record: MirrorRecord): string {
  return `${record.last_modified}_${recordKey(resource, record)}`;
}
