/**
 * Verify: compares the mirror with the API record for record, and reports per resource the counts,
 * one checksum per side and the keys that differ.
 *
 * Against a server with checksums (GET /{resource}/checksums, decision 0038) both sides compute
 * them in SQL: the server per id range (the ids' first two hex digits, 256 ranges), the mirror the
 * same over its jsonb records (`jsonb_hash_extended`, the function the server applies), and only
 * the ranges that differ are compared record by record (/checksums/records, id + checksum, no
 * record bodies); when more than DRILL_RANGES_MAX ranges differ, the whole resource is. A matching
 * store costs one request per resource (against the export rate limit, as a snapshot does) and
 * never pages through the exports.
 *
 * Against a server without them (404) it walks the API's export and the mirror's table, hashes
 * every record's canonical JSON (keys sorted, so field order does not matter but every field and
 * its value do), and compares those (checksum over key + last_modified + record hash, in key order).
 */
import { createHash } from 'node:crypto';
import type { MirrorDatabase } from './mirror/mirror-database.ts';
import { keyChecksums, rangeChecksums, readRecords, type RangeChecksum } from './mirror/mirror.repository.ts';
import type { StoreReader } from './store-reader.ts';
import { recordKey, type MirrorRecord, type SyncResource } from './sync-resources.ts';

export interface ResourceComparison {
  resource: string;
  apiCount: number;
  mirrorCount: number;
  apiChecksum: string;
  mirrorChecksum: string;
  /** In the API, not in the mirror. */
  missing: string[];
  /** In the mirror, not in the API. */
  extra: string[];
  /** In both, with a different last_modified or any other field. */
  different: string[];
}

/** JSON with object keys sorted at every depth (array order is kept: it is part of the record). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function digest(resource: SyncResource, records: AsyncIterable<MirrorRecord>): Promise<Map<string, string>> {
  const hashes = new Map<string, string>();
  for await (const record of records) hashes.set(recordKey(resource, record), `${record.last_modified} ${sha256(canonicalJson(record))}`);
  return hashes;
}

function checksum(hashes: Map<string, string>): string {
  const hash = createHash('sha256');
  for (const k of [...hashes.keys()].sort()) hash.update(`${k} ${hashes.get(k)}\n`);
  return hash.digest('hex').slice(0, 16);
}

/** Hex digits of the ids that name the first level of ranges (2: 256 ranges). */
const RANGE_DIGITS = 2;
/** More differing ranges than this are compared as one: the whole resource's record checksums, paged. */
export const DRILL_RANGES_MAX = 8;

/** Compares every resource of `resources` between the API and the mirror. */
export async function verifyMirror(mirror: MirrorDatabase, reader: StoreReader, resources: readonly SyncResource[]): Promise<ResourceComparison[]> {
  const results: ResourceComparison[] = [];
  for (const resource of resources) {
    const byChecksums = await verifyByChecksums(mirror, reader, resource);
    if (byChecksums) {
      results.push(byChecksums);
      continue;
    }
    const api = await digest(resource, reader.exportRecords(resource, null));
    const local = await digest(resource, readRecords(mirror.db, resource));
    const missing: string[] = [];
    const different: string[] = [];
    for (const [k, h] of api) {
      const mine = local.get(k);
      if (mine === undefined) missing.push(k);
      else if (mine !== h) different.push(k);
    }
    const extra = [...local.keys()].filter((k) => !api.has(k));
    results.push({
      resource: resource.name,
      apiCount: api.size,
      mirrorCount: local.size,
      apiChecksum: checksum(api),
      mirrorChecksum: checksum(local),
      missing: missing.sort(),
      extra: extra.sort(),
      different: different.sort(),
    });
  }
  return results;
}

const sameRange = (a: RangeChecksum | undefined, b: RangeChecksum | undefined) => a?.count === b?.count && a?.checksum === b?.checksum;
const total = (ranges: readonly RangeChecksum[]) => String(ranges.reduce((sum, r) => sum + BigInt(r.checksum), 0n));

/** The comparison by server-side checksums, or null when the server has none (the caller walks the export). */
async function verifyByChecksums(mirror: MirrorDatabase, reader: StoreReader, resource: SyncResource): Promise<ResourceComparison | null> {
  if (!reader.rangeChecksums || !reader.recordChecksums) return null;
  const api = await reader.rangeChecksums(resource, '', RANGE_DIGITS);
  if (api === null) return null;
  const local = await rangeChecksums(mirror.db, resource, '', RANGE_DIGITS);
  const apiRanges = new Map(api.map((r) => [r.range, r]));
  const localRanges = new Map(local.map((r) => [r.range, r]));
  const differing = [...new Set([...apiRanges.keys(), ...localRanges.keys()])].filter((r) => !sameRange(apiRanges.get(r), localRanges.get(r))).sort();
  const missing: string[] = [];
  const extra: string[] = [];
  const different: string[] = [];
  if (differing.length > 0) {
    const prefixes = differing.length > DRILL_RANGES_MAX ? [''] : differing;
    const apiRecords = new Map<string, string>();
    for (const prefix of prefixes) for await (const r of reader.recordChecksums(resource, prefix)) apiRecords.set(r.id, r.checksum);
    const localRecords = new Map((await keyChecksums(mirror.db, resource, prefixes)).map((r) => [r.key, r.checksum]));
    for (const [k, h] of apiRecords) {
      const mine = localRecords.get(k);
      if (mine === undefined) missing.push(k);
      else if (mine !== h) different.push(k);
    }
    for (const k of localRecords.keys()) if (!apiRecords.has(k)) extra.push(k);
  }
  return {
    resource: resource.name,
    apiCount: api.reduce((n, r) => n + r.count, 0),
    mirrorCount: local.reduce((n, r) => n + r.count, 0),
    apiChecksum: total(api),
    mirrorChecksum: total(local),
    missing: missing.sort(),
    extra: extra.sort(),
    different: different.sort(),
  };
}

/** True when every resource matched. */
export function mirrorMatches(results: readonly ResourceComparison[]): boolean {
  return results.every((r) => r.missing.length === 0 && r.extra.length === 0 && r.different.length === 0);
}
