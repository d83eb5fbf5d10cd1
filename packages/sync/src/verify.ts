/**
 * Verify: compares the mirror with the API record for record. Per resource it walks the API's
 * export and the mirror's table, hashes every record's canonical JSON (keys sorted, so field order
 * does not matter but every field and its value do), and reports counts, one checksum per side
 * (over key + last_modified + record hash, in key order) and the keys that differ.
 */
import { createHash } from 'node:crypto';
import type { MirrorDatabase } from './mirror/mirror-database.ts';
import { readRecords } from './mirror/mirror.repository.ts';
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

/** Compares every resource of `resources` between the API and the mirror. */
export async function verifyMirror(mirror: MirrorDatabase, reader: StoreReader, resources: readonly SyncResource[]): Promise<ResourceComparison[]> {
  const results: ResourceComparison[] = [];
  for (const resource of resources) {
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

/** True when every resource matched. */
export function mirrorMatches(results: readonly ResourceComparison[]): boolean {
  return results.every((r) => r.missing.length === 0 && r.extra.length === 0 && r.different.length === 0);
}
