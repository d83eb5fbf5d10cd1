/**
 * Change → receiver latency of the embedded default (issue 25: "p99 ≤ 100 ms on an idle embedded
 * default"): `store-api all` on a fresh DATA_DIR (npm start's flags, the demo store seeded by its first
 * start), one webhook endpoint on a loopback receiver in its own process, then single customer
 * updates through the admin API, one at a time, each waited for at the receiver. The clock starts
 * before the PATCH is sent, so the figure includes the write itself (it errs long). The first
 * change after the start is measured alone and reported as `firstMs`, outside the samples: it
 * includes the process's first admin write, fan-out, signing and connection to the receiver, all
 * cold (JIT), a start cost paid once; the samples are the changes after it, as wrk's figures are
 * taken after a warm-up.
 *
 * `node --import tsx bench/embedded-webhook-latency.ts` prints JSON; `npm run bench` runs it.
 * BENCH_EMBEDDED_LATENCY_SAMPLES (default 100).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { EMBEDDED_NODE_ARGS, freePort, startServer } from './bench-tools.ts';
import { startReceiver } from './webhook-bench.ts';

const CLI = fileURLToPath(new URL('../bin/store-api.js', import.meta.url));

export interface EmbeddedLatency {
  samples: number;
  /** The first change after the start (not among the samples). */
  firstMs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

async function call(origin: string, token: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(origin + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json', 'idempotency-key': randomUUID() }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}

export async function benchEmbeddedWebhookLatency(samples = 100): Promise<EmbeddedLatency> {
  const dataDir = mkdtempSync(join(tmpdir(), 'store-api-embedded-latency-'));
  const receiver = await startReceiver();
  try {
    const port = await freePort();
    const env = { DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' };
    // The first start seeds the demo store; the admin key is made by the operator's CLI while the
    // directory is free (the embedded database takes a lock), then `all` starts again on it.
    const seeding = await startServer([...EMBEDDED_NODE_ARGS, CLI, 'all'], env, port);
    await seeding.stop();
    const made = JSON.parse(
      execFileSync(process.execPath, [CLI, 'tokens', 'create', '--name', 'bench-latency', '--scopes', 'admin,customers:read', '--json'], {
        env: { ...process.env, ...env },
        encoding: 'utf8',
      }),
    ) as { token: string };
    const server = await startServer([...EMBEDDED_NODE_ARGS, CLI, 'all'], env, port);
    try {
      const token = made.token;
      await call(server.origin, token, 'POST', '/admin/api/v1/webhooks/endpoints', { url: `${receiver.origin}/hook`, event_types: ['customer.updated'] });
      const page = (await call(server.origin, token, 'GET', `/api/v1/customers?limit=${Math.min(200, samples)}`)) as { data: { id: string }[] };
      if (page.data.length === 0) throw new Error('the demo store has no customers');
      const latencies: number[] = [];
      // i = -1: the first change after the start, measured alone (firstMs).
      let firstMs = 0;
      for (let i = -1; i < samples; i++) {
        const id = page.data[(i + page.data.length) % page.data.length]!.id;
        const written = performance.timeOrigin + performance.now();
        await call(server.origin, token, 'PATCH', `/admin/api/v1/customers/${id}`, { city: `City ${i}` });
        const deadline = performance.now() + 60_000;
        for (;;) {
          const arrived = await receiver.arrival(`customer.updated:${id}`);
          if (arrived !== undefined && arrived > written) {
            if (i < 0) firstMs = arrived - written;
            else latencies.push(arrived - written);
            break;
          }
          if (performance.now() > deadline) throw new Error(`customer.updated of ${id} did not arrive within 60 s`);
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
      }
      latencies.sort((a, b) => a - b);
      const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
      const round = (n: number) => Math.round(n * 10) / 10;
      return { samples: latencies.length, firstMs: round(firstMs), p50Ms: round(at(0.5)), p99Ms: round(at(0.99)), maxMs: round(latencies.at(-1)!) };
    } finally {
      await server.stop();
    }
  } finally {
    receiver.child.kill('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.log(JSON.stringify(await benchEmbeddedWebhookLatency(Number(process.env.BENCH_EMBEDDED_LATENCY_SAMPLES ?? 100))));
}
