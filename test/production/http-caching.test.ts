/**
 * HTTP niceties of the read API: conditional GET (ETag / If-None-Match → 304) on single resources,
 * br/gzip compression of JSON and NDJSON when asked for (exports still streamed), and the RFC 8288
 * `Link: <…>; rel="next"` header on every list and export page that has more.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { request } from 'undici';
import { pino } from 'pino';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

/** Parses `Link: <url>; rel="next"`. */
function nextLink(header: unknown): string | undefined {
  if (typeof header !== 'string') return undefined;
  return /<([^>]+)>;\s*rel="next"/.exec(header)?.[1];
}

describe.each(backends)('conditional GET, compression and Link (%s)', (backend) => {
  let t: TestApp;
  let headers: { authorization: string };
  let admin: { authorization: string };
  beforeAll(async () => {
    // Generous limits: this file makes more requests than one token's default minute allows.
    t = await buildTestApp(backend, { RATE_LIMIT_STANDARD: '100000', RATE_LIMIT_EXPORT: '100000' });
    await generateDemoStore(t.database.db, { products: 40, customers: 25, orders: 36, seed: 7 });
    headers = await t.auth();
    admin = await t.auth(['admin']);
  });
  afterAll(async () => t?.close());

  describe('ETag / If-None-Match', () => {
    it.each(['products', 'orders', 'customers'])('%s/:id answers 304 while the record is unchanged', async (resource) => {
      const list = await t.app.inject({ url: `/api/v1/${resource}?limit=1`, headers });
      const id = list.json().data[0].id as string;
      const first = await t.app.inject({ url: `/api/v1/${resource}/${id}`, headers });
      expect(first.statusCode).toBe(200);
      const etag = first.headers.etag as string;
      expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
      const again = await t.app.inject({ url: `/api/v1/${resource}/${id}`, headers });
      expect(again.headers.etag).toBe(etag);

      const notModified = await t.app.inject({ url: `/api/v1/${resource}/${id}`, headers: { ...headers, 'if-none-match': etag } });
      expect(notModified.statusCode).toBe(304);
      expect(notModified.body).toBe('');
      expect(notModified.headers.etag).toBe(etag);
      expect(notModified.headers['x-ratelimit-remaining']).toBeDefined();

      for (const variant of [`W/${etag}`, `"other", ${etag}`, '*']) {
        expect((await t.app.inject({ url: `/api/v1/${resource}/${id}`, headers: { ...headers, 'if-none-match': variant } })).statusCode, variant).toBe(304);
      }
      const stale = await t.app.inject({ url: `/api/v1/${resource}/${id}`, headers: { ...headers, 'if-none-match': '"stale"' } });
      expect(stale.statusCode).toBe(200);
      expect(stale.json()).toEqual(first.json());
    });

    it('changes the ETag when the record changes', async () => {
      const id = (await t.app.inject({ url: '/api/v1/products?limit=1', headers })).json().data[0].id as string;
      const before = await t.app.inject({ url: `/api/v1/products/${id}`, headers });
      const patched = await t.app.inject({
        method: 'PATCH',
        url: `/admin/api/v1/products/${id}`,
        headers: admin,
        payload: { name: 'Renamed for the ETag test' },
      });
      expect(patched.statusCode).toBe(200);
      const after = await t.app.inject({ url: `/api/v1/products/${id}`, headers: { ...headers, 'if-none-match': before.headers.etag as string } });
      expect(after.statusCode).toBe(200);
      expect(after.json().data.name).toBe('Renamed for the ETag test');
      expect(after.headers.etag).not.toBe(before.headers.etag);
    });

    it('sends no ETag on errors or lists', async () => {
      const missing = await t.app.inject({ url: '/api/v1/products/0d7a6a3c-1111-4222-8333-444455556666', headers });
      expect(missing.statusCode).toBe(404);
      expect(missing.headers.etag).toBeUndefined();
      expect((await t.app.inject({ url: '/api/v1/products', headers })).headers.etag).toBeUndefined();
    });
  });

  describe('compression', () => {
    it.each([
      ['gzip', gunzipSync],
      ['br', brotliDecompressSync],
    ] as const)('compresses a JSON list with %s when asked', async (encoding, decompress) => {
      const plain = await t.app.inject({ url: '/api/v1/products?limit=20', headers });
      expect(plain.headers['content-encoding']).toBeUndefined();
      const packed = await t.app.inject({ url: '/api/v1/products?limit=20', headers: { ...headers, 'accept-encoding': `${encoding}` } });
      expect(packed.statusCode).toBe(200);
      expect(packed.headers['content-encoding']).toBe(encoding);
      expect(packed.headers.vary).toMatch(/accept-encoding/i);
      expect(packed.rawPayload.length).toBeLessThan(plain.rawPayload.length / 2);
      expect(decompress(packed.rawPayload).toString()).toBe(plain.body);
    });

    it('prefers br when the client accepts both', async () => {
      const res = await t.app.inject({ url: '/api/v1/products?limit=20', headers: { ...headers, 'accept-encoding': 'gzip, deflate, br' } });
      expect(res.headers['content-encoding']).toBe('br');
    });

    it('leaves small bodies alone', async () => {
      const res = await t.app.inject({ url: '/api/v1/customers?limit=1', headers: { ...headers, 'accept-encoding': 'gzip' } });
      expect(res.rawPayload.length).toBeLessThan(1024);
      expect(res.headers['content-encoding']).toBeUndefined();
    });

    it('compresses an NDJSON export and still streams it (chunked, no Content-Length)', async () => {
      const app = await buildApp({ ...t.ctx, config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', RATE_LIMIT_EXPORT: '100' }) });
      await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
        const plain = await request(`${base}/api/v1/products/export?limit=40&include_inactive=true`, { headers });
        const plainText = await plain.body.text();
        expect(plainText.trim().split('\n')).toHaveLength(40);
        for (const encoding of ['gzip', 'br'] as const) {
          const res = await request(`${base}/api/v1/products/export?limit=40&include_inactive=true`, { headers: { ...headers, 'accept-encoding': encoding } });
          expect(res.statusCode).toBe(200);
          expect(res.headers['content-type']).toMatch(/^application\/x-ndjson/);
          expect(res.headers['content-encoding']).toBe(encoding);
          expect(res.headers['transfer-encoding']).toBe('chunked');
          expect(res.headers['content-length']).toBeUndefined();
          expect(res.headers['x-next-cursor']).toBe(plain.headers['x-next-cursor']);
          const body = Buffer.from(await res.body.arrayBuffer());
          const text = (encoding === 'gzip' ? gunzipSync(body) : brotliDecompressSync(body)).toString();
          expect(text).toBe(plainText);
        }
      } finally {
        await app.close();
      }
    });
  });

  describe('Link: rel="next"', () => {
    it.each(['products', 'orders', 'customers', 'inventory', 'inventory/movements'])('walks every page of %s by following Link alone', async (resource) => {
      const all = (await t.app.inject({ url: `/api/v1/${resource}?limit=200`, headers })).json();
      expect(all.pagination.has_more).toBe(false);
      const seen: string[] = [];
      let url: string | undefined = `/api/v1/${resource}?limit=7&order=desc`;
      let pages = 0;
      while (url) {
        const res = await t.app.inject({ url, headers });
        expect(res.statusCode).toBe(200);
        const body = res.json();
        seen.push(...body.data.map((r: { id?: string; product_id?: string }) => r.id ?? r.product_id));
        const link = nextLink(res.headers.link);
        expect(Boolean(link), `Link on a page with has_more=${body.pagination.has_more}`).toBe(body.pagination.has_more);
        if (link) {
          const next = new URL(link, 'http://root.invalid');
          expect(next.origin).toBe('http://root.invalid'); // root-relative
          expect(next.pathname).toBe(`/api/v1/${resource}`);
          expect(next.searchParams.get('cursor')).toBe(body.pagination.next_cursor);
          expect(next.searchParams.get('limit')).toBe('7');
          expect(next.searchParams.get('order')).toBe('desc');
          url = next.pathname + next.search;
        } else {
          url = undefined;
        }
        pages++;
      }
      expect(pages).toBeGreaterThanOrEqual(Math.ceil(all.data.length / 7));
      expect(seen).toHaveLength(all.data.length);
      expect(new Set(seen)).toEqual(new Set(all.data.map((r: { id?: string; product_id?: string }) => r.id ?? r.product_id)));
    });

    it('links export pages too, keeping the filters', async () => {
      const res = await t.app.inject({ url: '/api/v1/products/export?include_inactive=true&limit=5', headers });
      expect(res.headers['x-has-more']).toBe('true');
      const link = new URL(nextLink(res.headers.link)!, 'http://root.invalid');
      expect(link.pathname).toBe('/api/v1/products/export');
      expect(link.searchParams.get('cursor')).toBe(res.headers['x-next-cursor']);
      expect(link.searchParams.get('include_inactive')).toBe('true');
      const last = await t.app.inject({ url: '/api/v1/products/export?include_inactive=true&limit=500', headers });
      expect(last.headers['x-has-more']).toBe('false');
      expect(last.headers.link).toBeUndefined();
    });

    it('makes the link absolute on PUBLIC_URL when one is configured', async () => {
      const app = await buildApp({
        ...t.ctx,
        config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', PUBLIC_URL: 'https://store.example/' }),
        logger: pino({ level: 'silent' }),
      });
      try {
        const { token } = await createToken(t.database.db, { name: 'public url' });
        const res = await app.inject({ url: '/api/v1/customers?limit=3', headers: { authorization: `Bearer ${token}` } });
        expect(nextLink(res.headers.link)).toMatch(/^https:\/\/store\.example\/api\/v1\/customers\?limit=3&cursor=/);
      } finally {
        await app.close();
      }
    });
  });
});
