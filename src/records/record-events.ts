/**
 * The events each kind of change appends, from the resource's own source (its declaration,
 * records/resource.ts); each feature names its own kinds (catalog/product-events.ts,
 * inventory/stock-events.ts, orders/order-events.ts, customers/customer-events.ts): `data` is the record's stored document (db/documents.ts) as the statement
 * triggers left it after the change, the same bytes a GET returns at that moment, with its `version`;
 * an `updated` event's `previous` holds what the change changed (decision 0057).
 */
import { sql, type RawBuilder } from 'kysely';
import { previousColumn } from '../db/documents.ts';
import type { WriteContext } from '../db/write-clock.ts';
import { sourceConditions } from '../db/keyset-page.ts';
import type { ResourceDeclaration } from './resource.ts';
import { appendEventsInOrder } from '../events/event-log.ts';
import { chunks } from '../shared/chunks.ts';

/**
 * Sorted distinct ids in chunks of bounded size: a bulk import touching 100k resources appends its
 * events in statements of at most EVENT_STATEMENT_ROWS rows, so the embedded database yields to the
 * HTTP side between them (db/database.ts).
 */
const EVENT_CHUNK = 250;
const EVENT_STATEMENT_ROWS = 3 * EVENT_CHUNK;
const idChunks = (ids: readonly string[]) => chunks([...new Set(ids)].sort(), EVENT_CHUNK);

/**
 * What an event of `kind` carries as `previous` (decision 0057): for `updated`, the fields this
 * transaction changed with their values before it, as the document triggers kept them in the
 * document's `_previous` column (`{}` when this transaction did not change the record, or created
 * it); nothing for the other kinds. The record's row is the source's, aliased as its document's.
 */
function previousOf(resource: ResourceDeclaration, kind: string): RawBuilder<unknown> {
  if (kind !== 'updated') return sql`NULL::json`;
  const { alias, column } = resource.document;
  return sql`coalesce(CASE WHEN ${sql.ref(`${alias}.version_xact`)} = pg_current_xact_id() THEN ${sql.ref(`${alias}.${previousColumn(column)}`)} END, '{}'::json)`;
}

/** The events of one kind of change: `${prefix}.${kind}` for each record of `resource` among `ids`. */
export interface RecordChanges {
  resource: ResourceDeclaration;
  kind: string;
  ids: readonly string[];
}

/**
 * Appends `${prefix}.${kind}` for each record of `resource` among `ids` (records outside the
 * source's base condition, e.g. untracked products for inventory, are skipped), set-based.
 */
export async function recordsChanged<Prefix extends string, Kind extends string>(
  ctx: WriteContext,
  resource: ResourceDeclaration<string, string, Prefix, Kind>,
  kind: NoInfer<Kind>,
  ids: readonly string[],
): Promise<void> {
  await recordsChangedInOrder(ctx, [{ resource, kind, ids }]);
}

/**
 * Appends the events of each of `changes` in turn (all of the first's, by id, then the second's…),
 * several kinds in one statement of at most EVENT_STATEMENT_ROWS rows: a step of a stock import
 * appends its movements', inventory records' and products' events in one statement, not three.
 * Each record is read by its id through the primary key, joined to the ids: with `id = ANY(ids)`
 * and the inventory's condition the planner chose the stock-tracked partial index and read about
 * three times the pages.
 */
export async function recordsChangedInOrder(ctx: WriteContext, changes: readonly RecordChanges[]): Promise<void> {
  const parts = changes.flatMap(({ resource, kind, ids }) => {
    const { source, events } = resource;
    if (!events) throw new Error(`resource ${resource.name} declares no events`);
    const type = `${events.prefix}.${kind}`;
    return idChunks(ids).map((part) => ({
      type,
      previous: true,
      rows: part.length,
      source: sql`SELECT ${source.id} AS resource_id, ${source.json} AS data, ${previousOf(resource, kind)} AS previous
        FROM unnest(${part}::uuid[]) AS changed(id) CROSS JOIN ${source.from} WHERE ${sourceConditions(source, [sql`${source.id} = changed.id`])}`,
    }));
  });
  for (let from = 0; from < parts.length; ) {
    let to = from + 1;
    for (let rows = parts[from]!.rows; to < parts.length && rows + parts[to]!.rows <= EVENT_STATEMENT_ROWS; to++) rows += parts[to]!.rows;
    await appendEventsInOrder(ctx, parts.slice(from, to));
    from = to;
  }
}
