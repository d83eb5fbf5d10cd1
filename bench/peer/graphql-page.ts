/**
 * The peer of the list benchmark: PostGraphile 5 (npm `postgraphile@5`) over the same database in
 * one process, asked for the equivalent page — 200 active products with their active variants and
 * images, in (last_modified, id) order, after the same cursor. Installed on first use into a cache
 * directory outside the project (it is not a dependency of the service); on Node 20 it needs the
 * Promise.withResolvers polyfill loaded with `node -r`.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { log, startServer, type ServerProcess } from '../bench-tools.ts';

const CACHE = join(tmpdir(), 'store-api-bench-postgraphile');
const here = (name: string) => fileURLToPath(new URL(`./${name}`, import.meta.url));

/** Installs PostGraphile 5 into the cache directory unless it is there already. */
export function installPostGraphile(): string {
  if (!existsSync(join(CACHE, 'node_modules/postgraphile/package.json'))) {
    log(`peer: installing postgraphile@5 into ${CACHE}`);
    mkdirSync(CACHE, { recursive: true });
    writeFileSync(join(CACHE, 'package.json'), '{ "name": "store-api-bench-peer", "private": true, "type": "module" }\n');
    execFileSync('npm', ['install', '--no-audit', '--no-fund', 'postgraphile@5'], { cwd: CACHE, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  for (const file of ['promise-with-resolvers.cjs', 'postgraphile-server.mjs']) copyFileSync(here(file), join(CACHE, file));
  return CACHE;
}

export async function startPostGraphile(databaseUrl: string, port: number): Promise<ServerProcess> {
  const dir = installPostGraphile();
  return startServer(['-r', join(dir, 'promise-with-resolvers.cjs'), join(dir, 'postgraphile-server.mjs'), String(port)], { DATABASE_URL: databaseUrl }, port, {
    path: '/graphql',
    ready: (status) => status === 405,
  });
}

async function graphql<T>(origin: string, query: string): Promise<T> {
  const res = await fetch(`${origin}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  const body = (await res.json()) as { data?: T; errors?: unknown };
  if (!body.data) throw new Error(`PostGraphile: ${JSON.stringify(body.errors)}`);
  return body.data;
}

/** The JSON body of the page query after the active product at `position` (0-based). */
export async function peerPageBody(origin: string, position: number, limit: number): Promise<string> {
  const order = 'orderBy: [LAST_MODIFIED_ASC, PRIMARY_KEY_ASC]';
  const at = await graphql<{ allProducts: { pageInfo: { endCursor: string } } }>(
    origin,
    `{ allProducts(first: 1, offset: ${position}, condition: {isActive: true}, ${order}) { pageInfo { endCursor } } }`,
  );
  const cursor = at.allProducts.pageInfo.endCursor;
  const children = '(condition: {isActive: true}, orderBy: [POSITION_ASC, PRIMARY_KEY_ASC])';
  const query = `{ allProducts(first: ${limit}, after: ${JSON.stringify(cursor)}, condition: {isActive: true}, ${order}) {
    pageInfo { endCursor hasNextPage }
    nodes { rowId name slug productType barcode sku price costPrice stock categoryId thumbnailUrl isActive createdAt lastModified
      variants: variantsByProductId${children} { nodes { rowId name sku price stock attributes } }
      images: imagesByProductId${children} { nodes { rowId imageUrl isPrimary } } } } }`;
  const page = await graphql<{ allProducts: { nodes: unknown[] } }>(origin, query);
  if (page.allProducts.nodes.length !== limit) throw new Error(`PostGraphile page has ${page.allProducts.nodes.length} products, not ${limit}`);
  return JSON.stringify({ query });
}

export const WRK_POST_SCRIPT = here('wrk-post.lua');
