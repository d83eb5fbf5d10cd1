/**
 * The chaos run shared by test/sync/chaos.test.ts (small, in `npm test`) and bench/chaos.ts (large):
 *
 *  1. A store of N demo products on the given back end; the real service as child processes
 *     (PostgreSQL: `store-api serve` + a separate `store-api worker`; PGlite: `store-api all`).
 *  2. The sync tool's receiver behind a chaos front that answers 500, swallows requests until the
 *     sender times out (some after applying them, so the retry is a redelivery), or is down
 *     (connections reset) for whole windows. The endpoint is registered, then the initial sync runs.
 *  3. Concurrent writers through the admin API: orders placed, moved (cancel, refund…) and paid,
 *     products and variants created and deactivated, prices changed, stock adjusted, CSV imports
 *     stamping many rows with one last_modified. Meanwhile the worker (PGlite: the whole service)
 *     is SIGKILLed and restarted.
 *  4. The writers stop, the receiver heals, the run waits until the last write's event was
 *     delivered and nothing is pending, then verifies (before reconcile: only records of
 *     dead-lettered events may differ), reconciles, verifies again and checks the service's
 *     delivery table: every event delivered (and received by the mirror) or dead-lettered.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database.ts';
import { ORDER_TRANSITIONS, PAYMENT_TRANSITIONS, type OrderStatus, type PaymentStatus } from '../../src/orders/order-status.ts';
import { startStoreApi, type StoreApiProcess } from '../production/process-helpers.ts';
import {
  handleWebhook,
  clientStoreReader,
  initialSync,
  mirrorMatches,
  reconcile,
  verifyMirror,
  webhookVerifier,
  SYNC_RESOURCES,
  type MirrorDatabase,
  type ReconcileReport,
  type ResourceComparison,
} from '../../packages/sync/src/index.ts';
import { receivedEventIds, eventSummary, readRecords, readSyncState } from '../../packages/sync/src/mirror/mirror.repository.ts';

export interface ChaosOptions {
  backend: 'pglite' | 'postgres';
  /** PostgreSQL back end: the service's (empty, migrated or not) database. */
  databaseUrl?: string;
  /** The mirror, already open (any back end). */
  mirror: MirrorDatabase;
  products: number;
  /** How long the writers run. */
  durationMs: number;
  writers?: number;
  /** SIGKILLs of the worker (PGlite: of the whole service) during the run. */
  kills?: number;
  /** How long the receiver keeps failing after the writers stopped (default: half of durationMs). */
  receiverChaosAfterMs?: number;
  /** Rows of each CSV import (every row of one import gets the same last_modified). */
  csvRows?: number;
  /** Every writer imports a CSV every this many operations (default 40). */
  csvEvery?: number;
  /** Pause of each writer between two operations (default 0: as fast as the service answers). */
  writePauseMs?: number;
  /** Share of requests the chaos front fails (500, swallowed, applied-then-swallowed), each. */
  failureRate?: number;
  log?: (line: string) => void;
}

export interface ChaosReport {
  /** Each resource's cursor after the initial sync (a snapshot's end cursor ends with the nil id). */
  initialCursors: Record<string, string | null>;
  writes: Record<string, number>;
  receiver: Record<string, number>;
  kills: number;
  events: number;
  delivered: number;
  deadLetters: number;
  /** Events the mirror received more than once (redeliveries, ignored). */
  duplicates: number;
  /** Events delivered (succeeded) that the mirror has no record of: must be empty. */
  lostEvents: string[];
  /** Events without a delivery to the endpoint, or whose delivery is not finished: must be empty. */
  undelivered: string[];
  /** Keys differing before the reconcile, per resource, that no dead-lettered event explains. */
  unexplainedBeforeReconcile: Record<string, string[]>;
  /** For each unexplained key: the mirror's and the API's record and the service's events for it. */
  unexplainedDetail: unknown[];
  beforeReconcile: ResourceComparison[];
  reconcile: ReconcileReport[];
  afterReconcile: ResourceComparison[];
  recordsCompared: number;
  mismatches: number;
  seconds: number;
}

const TIMEOUT_MS = 1000;
const SERVICE_ENV: Record<string, string> = {
  WEBHOOK_POLL_INTERVAL_MS: '100',
  WEBHOOK_RETRY_SCHEDULE_MS: '100,200,400,800,1600',
  WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  WEBHOOK_LEASE_MS: '3000',
  WEBHOOK_BREAKER_THRESHOLD: '10',
  WEBHOOK_BREAKER_PAUSE_MS: '500',
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  RATE_LIMIT_STANDARD: '1000000',
  RATE_LIMIT_EXPORT: '1000000',
  DATABASE_POOL_SIZE: '5',
};

/** Runs one chaos run and reports what it saw; the caller asserts on the report. */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const started = Date.now();
  const log = (line: string) => options.log?.(`${((Date.now() - started) / 1000).toFixed(1)} s ${line}`);
  const failureRate = options.failureRate ?? 0.08;
  const initialCursors: Record<string, string | null> = {};
  const dataDir = options.backend === 'pglite' ? mkdtempSync(join(tmpdir(), 'store-api-chaos-')) : undefined;
  const storeEnv: Record<string, string> = { ...SERVICE_ENV, ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : { DATA_DIR: dataDir! }) };

  // 1. Store and tokens, before any server holds the (embedded) database.
  // PGlite: the token command creates the directory, and the first `all` seeds the demo store
  // (one process start less); PostgreSQL: the generator and the token command at once.
  const tokenArgs = ['tokens', 'create', '--create', '--name', 'chaos', '--scopes', 'admin,products:read,orders:read,customers:read,inventory:read', '--json'];
  const [tokenOutput] = await Promise.all([
    runCli(tokenArgs, storeEnv),
    options.backend === 'postgres' ? runCli(['demo', 'generate', '--create', '--products', String(options.products), '--seed', '7'], storeEnv) : undefined,
  ]);
  const token = JSON.parse(tokenOutput).token as string;
  const port = await freePort();
  const env = { ...storeEnv, PORT: String(port), ...(options.backend === 'pglite' ? { SEED_DEMO: 'true', SEED_DEMO_PRODUCTS: String(options.products) } : {}) };
  const base = `http://127.0.0.1:${port}`;
  const service = new ServiceProcesses(options.backend, env);
  const front = await new ChaosFront(options.mirror, failureRate).start();
  try {
    await service.start();
    log(`service up on ${base} (${options.backend})`);
    const admin = new AdminApi(base, token, service);
    const endpoint = (await admin.call('POST', '/webhooks/endpoints', { url: front.url, description: 'chaos mirror' })).data as {
      id: string;
      secret: string;
      created_at: string;
    };
    front.verify = webhookVerifier([endpoint.secret]);
    const reader = clientStoreReader({ baseUrl: base, token });
    await initialSync(options.mirror, reader, SYNC_RESOURCES);
    for (const resource of SYNC_RESOURCES) initialCursors[resource.name] = (await readSyncState(options.mirror.db, resource.name)).export_cursor;
    log('initial sync done');

    // 3. Writers and chaos.
    const world = await World.load(reader);
    const writes: Record<string, number> = {};
    const deadline = Date.now() + options.durationMs;
    world.csvRows = options.csvRows ?? 25;
    world.csvEvery = options.csvEvery ?? 40;
    const writers = Array.from({ length: options.writers ?? 4 }, () => writerLoop(admin, world, writes, deadline, options.writePauseMs ?? 0));
    const kills = options.kills ?? 2;
    let killed = 0;
    const chaos = (async () => {
      for (let i = 1; i <= kills; i++) {
        await pauseUntil(deadline - options.durationMs + (options.durationMs * i) / (kills + 1));
        await service.killAndRestart();
        killed++;
        log(`killed and restarted the ${options.backend === 'postgres' ? 'worker' : 'service'} (${i}/${kills})`);
      }
    })();
    await Promise.all([...writers, chaos, front.outages(deadline)]);
    log(`writers done: ${JSON.stringify(writes)}`);
    // The receiver stays unreliable a while longer: the backlog of the writes meets it too.
    const tail = options.receiverChaosAfterMs ?? options.durationMs / 2;
    await front.outages(Date.now() + tail);
    log(`receiver healed: ${JSON.stringify(front.counts)}`);

    // 4. Heal, drain, check.
    front.healthy = true;
    const marker = (await admin.call('POST', '/customers', { name: 'chaos end marker' })).data as { id: string };
    await waitFor(async () => front.sawCustomer(marker.id), 120_000, "the last write's event to reach the mirror");
    log('last write delivered');
    await waitFor(async () => (await admin.pendingDeliveries(endpoint.id)) === 0, 120_000, 'no pending deliveries');
    log('no delivery pending');
    const beforeReconcile = await verifyMirror(options.mirror, reader, SYNC_RESOURCES);
    const beforeMirror = await mirrorSnapshot(options.mirror, reader, beforeReconcile);
    // Pages smaller than a CSV import: the ties must be carried across page boundaries.
    const reconcileReports = await reconcile(options.mirror, reader, SYNC_RESOURCES, { pageSize: 10 });
    log(`reconciled: ${reconcileReports.map((r) => `${r.resource} ${r.applied}/${r.pulled}`).join(', ')}`);
    const afterReconcile = await verifyMirror(options.mirror, reader, SYNC_RESOURCES);
    log('verified');

    await service.stop();
    const delivery = await deliveryFacts(options.backend === 'postgres' ? { databaseUrl: options.databaseUrl } : { dataDir }, endpoint.id);
    const received = await receivedEventIds(options.mirror.db);
    const summary = await eventSummary(options.mirror.db);
    const deadResources = new Set(delivery.deadResourceIds);
    const unexplainedBeforeReconcile: Record<string, string[]> = {};
    for (const r of beforeReconcile) {
      const ids = [...r.missing, ...r.extra, ...r.different].filter((id) => !deadResources.has(id));
      if (ids.length) unexplainedBeforeReconcile[r.resource] = ids;
    }
    const unexplainedDetail =
      Object.keys(unexplainedBeforeReconcile).length === 0
        ? []
        : await explainDifferences(
            options.backend === 'postgres' ? { databaseUrl: options.databaseUrl } : { dataDir },
            endpoint.id,
            beforeMirror,
            unexplainedBeforeReconcile,
          );
    return {
      initialCursors,
      writes,
      receiver: front.counts,
      kills: killed,
      events: delivery.events,
      delivered: delivery.succeeded.length,
      deadLetters: delivery.deadResourceIds.length,
      duplicates: summary.duplicates,
      lostEvents: delivery.succeeded.filter((id) => !received.has(id)),
      undelivered: delivery.unfinished,
      unexplainedBeforeReconcile,
      unexplainedDetail,
      beforeReconcile,
      reconcile: reconcileReports,
      afterReconcile,
      recordsCompared: afterReconcile.reduce((n, r) => n + r.apiCount, 0),
      mismatches: afterReconcile.reduce((n, r) => n + r.missing.length + r.extra.length + r.different.length, 0),
      seconds: Math.round((Date.now() - started) / 1000),
    };
  } finally {
    await service.stop();
    await front.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

/** True when the report shows a lossless run. */
export function chaosClean(report: ChaosReport): boolean {
  return (
    mirrorMatches(report.afterReconcile) &&
    report.lostEvents.length === 0 &&
    report.undelivered.length === 0 &&
    Object.keys(report.unexplainedBeforeReconcile).length === 0
  );
}

// ---------------------------------------------------------------------------------------------
// The service under test.

class ServiceProcesses {
  #api?: StoreApiProcess;
  #worker?: StoreApiProcess;
  #ready: Promise<void> = Promise.resolve();
  constructor(
    readonly backend: 'pglite' | 'postgres',
    readonly env: Record<string, string>,
  ) {}

  /** Resolves once the API answers again (writers wait on it after a connection error). */
  get ready(): Promise<void> {
    return this.#ready;
  }

  async start(): Promise<void> {
    if (this.backend === 'postgres') {
      this.#api = startStoreApi(['serve'], this.env, { name: 'serve' });
      this.#worker = startStoreApi(['worker'], { ...this.env, PORT: '0' }, { name: 'worker' });
      await Promise.all([this.#api.waitFor(/listening on http/, 5 * 60_000), this.#worker.waitFor(/Webhook worker started/, 5 * 60_000)]);
    } else {
      this.#api = startStoreApi(['all'], this.env, { name: 'all' });
      // The first start seeds the demo store: minutes for a large one.
      await this.#api.waitFor(/listening on http/, 30 * 60_000);
    }
  }

  async killAndRestart(): Promise<void> {
    if (this.backend === 'postgres') {
      await this.#worker!.stop('SIGKILL');
      this.#worker = startStoreApi(['worker'], { ...this.env, PORT: '0' }, { name: 'worker' });
      await this.#worker.waitFor(/Webhook worker started/, 5 * 60_000);
      return;
    }
    let open!: () => void;
    this.#ready = new Promise((resolve) => (open = resolve));
    await this.#api!.stop('SIGKILL');
    this.#api = startStoreApi(['all'], this.env, { name: 'all' });
    await this.#api.waitFor(/listening on http/, 5 * 60_000);
    open();
  }

  /** The API process's last logged errors (for a failure message). */
  recentErrors(): string {
    return (this.#api?.output() ?? '')
      .split('\n')
      .filter((line) => /"level":(50|60)/.test(line))
      .slice(-3)
      .join('\n');
  }

  async stop(): Promise<void> {
    await this.#worker?.stop('SIGTERM');
    await this.#api?.stop('SIGTERM');
  }
}

function runCli(args: string[], env: Record<string, string>): Promise<string> {
  const proc = startStoreApi(args, env, { name: `store-api ${args.join(' ')}` });
  return proc.exited.then((code) => {
    if (code !== 0) throw new Error(`store-api ${args.join(' ')} exited ${code}:\n${proc.output()}`);
    return proc.output();
  });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Facts from the service's own tables (read after it stopped, so PGlite's directory is free). */
/** The mirror's and the API's version of every record that differs (before the reconcile). */
async function mirrorSnapshot(mirror: MirrorDatabase, reader: ReturnType<typeof clientStoreReader>, comparisons: ResourceComparison[]) {
  const snapshot = new Map<string, { mirror?: unknown; api?: unknown }>();
  for (const c of comparisons) {
    const ids = new Set([...c.missing, ...c.extra, ...c.different]);
    if (ids.size === 0) continue;
    const resource = SYNC_RESOURCES.find((r) => r.name === c.resource)!;
    for await (const record of readRecords(mirror.db, resource)) {
      const id = String(record[resource.key]);
      if (ids.has(id)) snapshot.set(`${c.resource}/${id}`, { ...snapshot.get(`${c.resource}/${id}`), mirror: record });
    }
    for await (const record of reader.exportRecords(resource, null)) {
      const id = String(record[resource.key]);
      if (ids.has(id)) snapshot.set(`${c.resource}/${id}`, { ...snapshot.get(`${c.resource}/${id}`), api: record });
    }
  }
  return snapshot;
}

/** What a failed run needs to be understood: both versions, the fields that differ, the events. */
async function explainDifferences(
  where: { databaseUrl?: string; dataDir?: string },
  endpointId: string,
  snapshot: Awaited<ReturnType<typeof mirrorSnapshot>>,
  unexplained: Record<string, string[]>,
) {
  const handle = await openDatabase({ ...where, poolSize: 2 });
  try {
    const detail: unknown[] = [];
    for (const [resource, ids] of Object.entries(unexplained)) {
      for (const id of ids) {
        const { mirror, api } = snapshot.get(`${resource}/${id}`) ?? {};
        const m = (mirror ?? {}) as Record<string, unknown>;
        const a = (api ?? {}) as Record<string, unknown>;
        const fields = [...new Set([...Object.keys(m), ...Object.keys(a)])].filter((k) => JSON.stringify(m[k]) !== JSON.stringify(a[k]));
        const { rows: events } = await sql<{
          seq: string;
          type: string;
          created_at: string;
          last_modified: string;
          status: string | null;
          attempts: number | null;
        }>`
          SELECT e.seq::text, e.type, e.created_at::text, e.data->>'last_modified' AS last_modified, d.status, d.attempt_count AS attempts
          FROM events e LEFT JOIN webhook_deliveries d ON d.event_id = e.id AND d.endpoint_id = ${endpointId}::uuid
          WHERE e.resource_id = ${id} ORDER BY e.seq`.execute(handle.db);
        detail.push({ resource, id, fields: Object.fromEntries(fields.map((k) => [k, { mirror: m[k], api: a[k] }])), events });
      }
    }
    return detail;
  } finally {
    await handle.close();
  }
}

async function deliveryFacts(where: { databaseUrl?: string; dataDir?: string }, endpointId: string) {
  const handle = await openDatabase({ ...where, poolSize: 2 });
  try {
    const { rows } = await sql<{ event_id: string; resource_id: string; status: string | null }>`
      SELECT e.id AS event_id, e.resource_id, d.status
      FROM events e
      LEFT JOIN webhook_deliveries d ON d.event_id = e.id AND d.endpoint_id = ${endpointId}::uuid
      WHERE e.created_at > (SELECT created_at FROM webhook_endpoints WHERE id = ${endpointId}::uuid) AND e.type <> 'ping'`.execute(handle.db);
    return {
      events: rows.length,
      succeeded: rows.filter((r) => r.status === 'succeeded').map((r) => r.event_id),
      deadResourceIds: rows.filter((r) => r.status === 'dead').map((r) => r.resource_id),
      unfinished: rows.filter((r) => r.status !== 'succeeded' && r.status !== 'dead').map((r) => `${r.event_id}:${r.status ?? 'no delivery'}`),
    };
  } finally {
    await handle.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The receiver behind a chaos front.

class ChaosFront {
  readonly counts = { requests: 0, ok: 0, error500: 0, swallowed: 0, appliedThenSwallowed: 0, refused: 0 };
  healthy = false;
  verify: ReturnType<typeof webhookVerifier> = () => {
    throw new Error('no secret yet');
  };
  #down = false;
  #server: Server;
  #sockets = new Set<Socket>();
  #customers = new Set<string>();

  constructor(
    readonly mirror: MirrorDatabase,
    readonly failureRate: number,
  ) {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on(
        'end',
        () =>
          void (async () => {
            this.counts.requests++;
            const body = Buffer.concat(chunks).toString('utf8');
            const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
            const roll = this.healthy ? 1 : Math.random();
            if (this.#down) {
              this.counts.refused++;
              req.socket.destroy();
              return;
            }
            if (roll < this.failureRate) {
              this.counts.error500++;
              res.writeHead(500).end('chaos');
              return;
            }
            if (roll < 2 * this.failureRate) {
              this.counts.swallowed++; // never answered: the sender's timeout ends it
              return;
            }
            const result = await handleWebhook(this.mirror, this.verify, body, headers);
            if (result.event?.type === 'customer.created' && result.status === 200) this.#customers.add(String(result.event.data.id));
            if (roll < 3 * this.failureRate) {
              this.counts.appliedThenSwallowed++; // applied and committed, but the sender times out: a redelivery follows
              return;
            }
            if (result.status === 200) this.counts.ok++;
            res.writeHead(result.status).end(result.outcome);
          })(),
      );
    });
    this.#server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
      if (this.#down) {
        this.counts.refused++;
        s.destroy();
      }
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/webhooks`;
  }

  sawCustomer(id: string): boolean {
    return this.#customers.has(id);
  }

  /** Down windows (every connection reset) of 0.3–1 s, every 1–3 s, until `deadline`. */
  async outages(deadline: number): Promise<void> {
    while (Date.now() < deadline) {
      await pause(1000 + Math.random() * 2000);
      this.#down = true;
      for (const s of this.#sockets) s.destroy();
      await pause(300 + Math.random() * 700);
      this.#down = false;
    }
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

// ---------------------------------------------------------------------------------------------
// Writers.

class AdminApi {
  constructor(
    readonly base: string,
    readonly token: string,
    readonly service: ServiceProcesses,
  ) {}

  /** One admin call; resolves with the body, `{ conflict }` on a 4xx, retrying while the service restarts. */
  async call(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<any> {
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      let text: string;
      try {
        res = await fetch(`${this.base}/admin/api/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'content-type': contentType }) },
          body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
        });
        text = await res.text();
      } catch (error) {
        // The service is being restarted (PGlite): wait for it, then try again.
        if (attempt > 50) throw error;
        await this.service.ready;
        await pause(50);
        continue;
      }
      if (res.status >= 500) {
        if (attempt > 50)
          throw new Error(`${method} ${path} ${typeof body === 'string' ? body : JSON.stringify(body)}: ${res.status} ${text}\n${this.service.recentErrors()}`);
        await this.service.ready;
        continue;
      }
      if (res.status >= 400) return { conflict: res.status, detail: text };
      return text ? JSON.parse(text) : {};
    }
  }

  async pendingDeliveries(endpointId: string): Promise<number> {
    let n = 0;
    for (const status of ['pending', 'failed']) {
      n += ((await this.call('GET', `/webhooks/deliveries?endpoint_id=${endpointId}&status=${status}&limit=1`)).data as unknown[]).length;
    }
    return n;
  }
}

interface ProductFacts {
  id: string;
  active: boolean;
  tracked: boolean;
  sku: string | null;
  variants: { id: string; sku: string | null; active: boolean }[];
}

class World {
  products: ProductFacts[] = [];
  orders: { id: string; status: OrderStatus; payment: PaymentStatus }[] = [];
  customers: string[] = [];
  serial = 0;
  csvRows = 25;
  csvEvery = 40;

  static async load(reader: ReturnType<typeof clientStoreReader>): Promise<World> {
    const world = new World();
    const find = (name: string) => SYNC_RESOURCES.find((r) => r.name === name)!;
    for await (const p of reader.exportRecords(find('products'), null)) {
      world.products.push({
        id: p.id as string,
        active: p.is_active as boolean,
        tracked: ['physical', 'food', 'digital_card'].includes(p.product_type as string),
        sku: p.sku as string | null,
        variants: (p.variants as { id: string; sku: string | null }[]).map((v) => ({ id: v.id, sku: v.sku, active: true })),
      });
    }
    for await (const o of reader.exportRecords(find('orders'), null))
      world.orders.push({ id: o.id as string, status: o.status as OrderStatus, payment: o.payment_status as PaymentStatus });
    for await (const c of reader.exportRecords(find('customers'), null)) world.customers.push(c.id as string);
    return world;
  }

  pick<T>(list: T[]): T | undefined {
    return list[Math.floor(Math.random() * list.length)];
  }

  activeTracked(): ProductFacts[] {
    return this.products.filter((p) => p.active && p.tracked);
  }
}

type Op = (admin: AdminApi, world: World) => Promise<string>;

/** One CSV stamps every row with the same last_modified: the ties the cursors must not skip. */
const csvImport: Op = async (admin, world) => {
  const skus = new Set<string>();
  for (const p of world.activeTracked()) {
    if (p.variants.length === 0 && p.sku) skus.add(p.sku);
    for (const v of p.variants) if (v.active && v.sku) skus.add(v.sku);
    if (skus.size >= world.csvRows) break;
  }
  if (skus.size === 0) return 'import-skipped';
  const csv = `sku,quantity_change\n${[...skus].map((s) => `${s},2`).join('\n')}\n`;
  const res = await admin.call('POST', '/inventory/import', csv, 'text/csv');
  return res.data ? 'csv-import' : 'csv-rejected';
};

const OPS: [number, Op][] = [
  [
    25,
    async (admin, world) => {
      const items = [];
      for (let i = 0; i < 1 + Math.floor(Math.random() * 3); i++) {
        const p = world.pick(world.activeTracked());
        if (!p) break;
        const v = world.pick(p.variants.filter((x) => x.active));
        if (p.variants.length > 0 && !v) continue;
        items.push({ product_id: p.id, variant_id: v?.id ?? null, quantity: 1 + Math.floor(Math.random() * 2) });
      }
      if (items.length === 0) return 'order-skipped';
      const res = await admin.call('POST', '/orders', {
        source: Math.random() < 0.5 ? 'pos' : 'online',
        payment_method: 'card',
        customer_name: 'Chaos buyer',
        items,
      });
      if (res.data) world.orders.push({ id: res.data.id, status: res.data.status, payment: res.data.payment_status });
      return res.data ? 'order-placed' : 'order-rejected';
    },
  ],
  [
    20,
    async (admin, world) => {
      const o = world.pick(world.orders.filter((x) => ORDER_TRANSITIONS[x.status].length > 0));
      if (!o) return 'status-skipped';
      // Lean towards cancel and refund, the moves that give stock back.
      const options = ORDER_TRANSITIONS[o.status];
      const to = options.find((s) => (s === 'cancelled' || s === 'refunded') && Math.random() < 0.4) ?? world.pick([...options])!;
      const res = await admin.call('POST', `/orders/${o.id}/status`, { status: to });
      if (res.data) o.status = res.data.status;
      return res.data ? `status-${to}` : 'status-conflict';
    },
  ],
  [
    10,
    async (admin, world) => {
      const o = world.pick(world.orders.filter((x) => PAYMENT_TRANSITIONS[x.payment].length > 0));
      if (!o) return 'payment-skipped';
      const to = world.pick([...PAYMENT_TRANSITIONS[o.payment]])!;
      const res = await admin.call('POST', `/orders/${o.id}/payment-status`, { payment_status: to });
      if (res.data) o.payment = res.data.payment_status;
      return res.data ? 'payment' : 'payment-conflict';
    },
  ],
  [
    7,
    async (admin, world) => {
      const n = ++world.serial;
      const variants = Array.from({ length: Math.floor(Math.random() * 3) }, (_, i) => ({
        name: `Size ${i}`,
        sku: `CH-${process.pid}-${Date.now()}-${n}-${i}`,
        price: 12 + i,
        stock: 30,
        attributes: { size: String(i) },
      }));
      const res = await admin.call('POST', '/products', {
        name: `Chaos product ${n}`,
        product_type: 'physical',
        sku: `CH-${process.pid}-${Date.now()}-${n}`,
        price: 9.99,
        stock: variants.length ? undefined : 40,
        variants,
        images: [{ image_url: `https://img.example.com/chaos/${n}.jpg`, is_primary: true }],
      });
      if (res.data)
        world.products.push({
          id: res.data.id,
          active: true,
          tracked: true,
          sku: res.data.sku,
          variants: res.data.variants.map((v: { id: string; sku: string }) => ({ id: v.id, sku: v.sku, active: true })),
        });
      return res.data ? 'product-created' : 'product-rejected';
    },
  ],
  [
    5,
    async (admin, world) => {
      const p = world.pick(world.products);
      if (!p) return 'activate-skipped';
      const res = await admin.call('PATCH', `/products/${p.id}`, { is_active: !p.active });
      if (res.data) p.active = res.data.is_active;
      return res.data ? (p.active ? 'product-reactivated' : 'product-deactivated') : 'activate-conflict';
    },
  ],
  [
    5,
    async (admin, world) => {
      const p = world.pick(world.products);
      if (!p) return 'price-skipped';
      const res = await admin.call('PATCH', `/products/${p.id}`, { price: Math.round(100 + Math.random() * 9900) / 100 });
      return res.data ? 'price-changed' : 'price-conflict';
    },
  ],
  [
    4,
    async (admin, world) => {
      const p = world.pick(world.products.filter((x) => x.variants.length > 0));
      if (!p) return 'variant-skipped';
      const n = ++world.serial;
      const res = await admin.call('POST', `/products/${p.id}/variants`, {
        name: `Extra ${n}`,
        sku: `CHV-${process.pid}-${Date.now()}-${n}`,
        price: 15,
        stock: 10,
        attributes: { edition: String(n) },
      });
      const added = res.data?.variants?.find((v: { name: string }) => v.name === `Extra ${n}`);
      if (added) p.variants.push({ id: added.id, sku: added.sku, active: true });
      return res.data ? 'variant-added' : 'variant-rejected';
    },
  ],
  [
    4,
    async (admin, world) => {
      const p = world.pick(world.products.filter((x) => x.variants.filter((v) => v.active).length > 1));
      const v = p && world.pick(p.variants.filter((x) => x.active));
      if (!p || !v) return 'variant-skipped';
      const res = await admin.call('PATCH', `/products/${p.id}/variants/${v.id}`, { is_active: false });
      if (res.data) v.active = false;
      return res.data ? 'variant-deactivated' : 'variant-conflict';
    },
  ],
  [
    10,
    async (admin, world) => {
      const p = world.pick(world.activeTracked());
      if (!p) return 'adjust-skipped';
      const v = world.pick(p.variants.filter((x) => x.active));
      if (p.variants.length > 0 && !v) return 'adjust-skipped';
      const res = await admin.call('POST', '/inventory/adjustments', {
        product_id: p.id,
        variant_id: v?.id ?? null,
        quantity_change: Math.floor(Math.random() * 11) - 3,
        note: 'chaos',
      });
      return res.data ? 'adjustment' : 'adjustment-rejected';
    },
  ],
  [
    7,
    async (admin, world) => {
      const id = Math.random() < 0.5 ? world.pick(world.customers) : undefined;
      const n = ++world.serial;
      const res = id
        ? await admin.call('PATCH', `/customers/${id}`, { city: world.pick(['Lisbon', 'Porto', 'Braga', 'Faro'])! })
        : await admin.call('POST', '/customers', { name: `Chaos customer ${n}`, email: `chaos${n}@example.com`, city: 'Lisbon' });
      if (!id && res.data) world.customers.push(res.data.id);
      return res.data ? (id ? 'customer-updated' : 'customer-created') : 'customer-rejected';
    },
  ],
];
const TOTAL_WEIGHT = OPS.reduce((n, [w]) => n + w, 0);

async function writerLoop(admin: AdminApi, world: World, writes: Record<string, number>, deadline: number, pauseMs: number): Promise<void> {
  for (let i = 0; Date.now() < deadline; i++) {
    let roll = Math.random() * TOTAL_WEIGHT;
    // Every writer imports a CSV early and then regularly: the ties must be in every run.
    const op =
      i % world.csvEvery === 2
        ? csvImport
        : OPS.find(([w]) => {
            roll -= w;
            return roll < 0;
          })![1];
    const what = await op(admin, world);
    writes[what] = (writes[what] ?? 0) + 1;
    // Pacing of a long run, so the webhook backlog stays within what the receiver drains.
    if (pauseMs > 0) await pause(pauseMs);
  }
}

// ---------------------------------------------------------------------------------------------

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Waits until the clock reaches `at` (the chaos schedule; no assertion depends on it). */
function pauseUntil(at: number): Promise<void> {
  return pause(Math.max(0, at - Date.now()));
}

/** Bounded polling of a condition. */
async function waitFor(condition: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await pause(100);
  }
}
