/**
 * Exports flow through the client without being buffered: on a 20,000-customer store, every record
 * of each export response is handed out while that response is still being read (its body has not
 * ended) and the client never reads far ahead of what it has handed out; and a response whose body
 * is held back half-way by a proxy already yields the records that did arrive.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { StoreApiClient } from '../../packages/client/src/index.ts';
import { startClientTestServer, type ClientTestServer } from './client-test-kit.ts';
import { FaultProxy, forward } from './fault-proxy.ts';

const CUSTOMERS = 20_000;

/** Per response: bytes the client has pulled from the body, and whether it pulled the end. */
interface Metered {
  bytesRead: number;
  ended: boolean;
}

/** A fetch whose response bodies are read strictly on demand and metered. */
function meteredFetch(responses: Metered[]): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!response.body) return response;
    const reader = response.body.getReader();
    const meter: Metered = { bytesRead: 0, ended: false };
    responses.push(meter);
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          const chunk = await reader.read();
          if (chunk.done) {
            meter.ended = true;
            controller.close();
            return;
          }
          meter.bytesRead += chunk.value.byteLength;
          controller.enqueue(chunk.value);
        },
        cancel: (reason) => reader.cancel(reason),
      },
      { highWaterMark: 0 },
    );
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

describe.each(backends)('export streaming (%s)', (backend) => {
  let server: ClientTestServer;

  beforeAll(async () => {
    server = await startClientTestServer(backend, UNLIMITED);
    // Plain rows are enough here and take a second to write (the demo generator would take minutes).
    await sql`
      INSERT INTO customers (id, name, email, city, is_active, created_at, last_modified)
      SELECT gen_random_uuid(), 'Customer ' || g, 'c' || g || '@example.com', 'Porto', true,
             now() - interval '1 day', now() - interval '1 day' + g * interval '1 millisecond'
      FROM generate_series(1, ${CUSTOMERS}) AS g`.execute(server.t.ctx.database.db);
  }, 180_000);
  afterAll(async () => server?.close());

  it('hands out each record while its response is still being read, never reading far ahead', async () => {
    const responses: Metered[] = [];
    const client = server.client({ fetch: meteredFetch(responses) });
    const iterator = client.customers.export();
    let responseSeen = 0;
    let consumedBytes = 0;
    let maxReadAhead = 0;
    let yieldedAfterEnd = 0;
    const ids = new Set<string>();
    for await (const customer of iterator) {
      const current = responses.at(-1)!;
      if (current.ended) yieldedAfterEnd++;
      if (responses.length !== responseSeen) {
        // The first record of the next export request.
        consumedBytes = 0;
        responseSeen = responses.length;
      }
      consumedBytes += Buffer.byteLength(JSON.stringify(customer)) + 1;
      maxReadAhead = Math.max(maxReadAhead, current.bytesRead - consumedBytes);
      ids.add(customer.id);
    }
    expect(ids.size).toBe(CUSTOMERS);
    expect(iterator.pages).toBe(CUSTOMERS / 500);
    // A buffering client would read each body to its end before handing out its first record.
    expect(yieldedAfterEnd).toBe(0);
    // Read-ahead is bounded by a transport chunk, not by the size of a page (~100 kB) or the export (~4 MB).
    const pageBytes = responses[0]!.bytesRead;
    expect(maxReadAhead).toBeLessThan(pageBytes);
    expect(responses.every((r) => r.ended)).toBe(true);
  });

  it('yields the records that arrived while the rest of the response is held back', async () => {
    const proxy = await new FaultProxy(server.baseUrl).start();
    let release!: () => void;
    const until = new Promise<void>((resolve) => {
      release = resolve;
    });
    proxy.fault = (req, n) => (n === 1 && req.url?.includes('/export') ? { kind: 'hold', afterBytes: 20_000, until } : forward);
    try {
      const client = new StoreApiClient({
        baseUrl: proxy.url,
        token: server.token,
        fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), 'accept-encoding': 'identity' } }),
      });
      const iterator = client.customers.export({ limit: 500 });
      const it = iterator[Symbol.asyncIterator]();
      // These resolve only if the client parses the stream as it arrives: the proxy holds the rest.
      const firstTen: string[] = [];
      for (let i = 0; i < 10; i++) firstTen.push(((await it.next()).value as { id: string }).id);
      expect(new Set(firstTen).size).toBe(10);
      release();
      let rest = 0;
      for (let r = await it.next(); !r.done; r = await it.next()) rest++;
      expect(firstTen.length + rest).toBe(CUSTOMERS);
    } finally {
      release();
      await proxy.close();
    }
  });
});
