/**
 * Checksums of a resource's records by id range, computed by the database (decision 0038): what
 * `store-api-sync verify` compares with its mirror instead of reading every record through the
 * export. A range is a prefix of the records' ids as text (lowercase UUID, dashes included); the
 * ranges of a prefix group its records by the next few hex digits.
 *
 * A record's checksum is `jsonb_hash_extended(<record JSON>::jsonb, 0)`: PostgreSQL's own 64-bit
 * hash of the record as a jsonb value, so it does not depend on how the JSON text was written
 * (key order, spaces, `19.90` against `19.9`: jsonb hashes numerics by value), only on the
 * record's fields and values. A mirror that stores the record as jsonb (PostgreSQL or PGlite)
 * computes the same number with the same function. A range's checksum is the exact sum of its
 * records' (a `numeric`, sent as text): it does not depend on the order rows are read in. This is
 * a check against loss and drift, not against an adversary: 64 bits per record, sums of them per
 * range.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../db/schema.ts';
import { sourceConditions, type ListSource } from '../db/keyset-page.ts';

/** The checksum of the records whose id starts with `range`. */
export interface RangeChecksum {
  range: string;
  count: number;
  checksum: string;
}

/** One record's checksum. */
export interface RecordChecksum {
  id: string;
  last_modified: string;
  checksum: string;
}

/** The text of the lowest and the highest UUID: a prefix is padded with their tails to bound its range. */
const UUID_LOW = '00000000-0000-0000-0000-000000000000';
const UUID_HIGH = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/**
 * A valid range prefix: the start of a lowercase UUID's text (hex digits, dashes where a UUID has
 * them), up to the whole UUID. Used as the query's pattern.
 */
export const RANGE_PREFIX_PATTERN =
  '^(?:[0-9a-f]{0,8}|[0-9a-f]{8}-[0-9a-f]{0,4}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{0,4}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{0,4}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{0,12})$';

/** The lowest and highest id whose text starts with `prefix` (a valid RANGE_PREFIX_PATTERN). */
export function rangeBounds(prefix: string): [string, string] {
  return [prefix + UUID_LOW.slice(prefix.length), prefix + UUID_HIGH.slice(prefix.length)];
}

/** Length of the ranges `digits` hex digits longer than a prefix of `prefixLength` characters (dashes are passed over). */
export function rangeLength(prefixLength: number, digits: number): number {
  let length = prefixLength;
  let added = 0;
  while (added < digits && length < UUID_LOW.length) {
    length++;
    if (UUID_LOW[length - 1] !== '-') added++;
  }
  return length;
}

/** The conditions every checksum query of `source` applies: its store, its own, the request's filters, the id range. */
function conditions(source: ListSource, filters: readonly RawBuilder<unknown>[], prefix: string): RawBuilder<unknown> {
  const [low, high] = rangeBounds(prefix);
  return sourceConditions(source, [...filters, sql`${source.id} BETWEEN ${low}::uuid AND ${high}::uuid`]);
}

const recordHash = (source: ListSource) => sql`jsonb_hash_extended((${source.json})::jsonb, 0)`;

/** Per range `digits` hex digits past `prefix`: its record count and checksum, ranges in order, empty ones left out. */
export async function rangeChecksums(
  db: Kysely<Database>,
  source: ListSource,
  filters: readonly RawBuilder<unknown>[],
  prefix: string,
  digits: number,
): Promise<RangeChecksum[]> {
  const length = rangeLength(prefix.length, digits);
  const { rows } = await sql<RangeChecksum>`
    SELECT left(${source.id}::text, ${length}) AS range, count(*)::int AS count, sum(${recordHash(source)})::text AS checksum
    FROM ${source.from}
    WHERE ${conditions(source, filters, prefix)}
    GROUP BY 1 ORDER BY 1
  `.execute(db);
  return rows;
}

/** Each record's checksum in the range `prefix`, by id, after `after` (an id), at most `limit`; hasMore when more follow. */
export async function recordChecksums(
  db: Kysely<Database>,
  source: ListSource,
  filters: readonly RawBuilder<unknown>[],
  prefix: string,
  after: string | undefined,
  limit: number,
): Promise<{ data: RecordChecksum[]; hasMore: boolean }> {
  const { rows } = await sql<RecordChecksum>`
    SELECT ${source.id}::text AS id, iso_utc(${source.lastModified}) AS last_modified, ${recordHash(source)}::text AS checksum
    FROM ${source.from}
    WHERE ${conditions(source, filters, prefix)} ${after === undefined ? sql`` : sql`AND ${source.id} > ${after}::uuid`}
    ORDER BY ${source.id}
    LIMIT ${limit + 1}
  `.execute(db);
  return { data: rows.slice(0, limit), hasMore: rows.length > limit };
}
