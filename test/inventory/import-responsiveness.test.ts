/**
 * A long database write must not starve the HTTP side. On the embedded default
 * PGlite runs in its own thread (decision 0030; before it, on this one, yielding between statements:
 * decision 0005); the test marks the moment the import's transaction has written its
 * first stock movements (a Kysely plugin watching the statements) and the moment it commits, and
 * asks GET /healthz over real HTTP back to back meanwhile: some answers must arrive in between.
 * (Ordering, not timing: without yielding between statements no answer can arrive in between,
 * because the client runs on the same blocked thread.) The import stays all-or-nothing.
 *
 * A large import logs how far it got every PROGRESS_LOG_INTERVAL_MS (shrunk here); the
 * import is held after its first movements until such a line has come, so without the lines it
 * never finishes.
 *
 * Decision 0036: a products list asked once the import has written its first movements is
 * answered before the import is: on PostgreSQL readers pass the import's transaction, on the embedded
 * database the import runs in committed steps (STOCK_IMPORT_STEP_ROWS) and the list's statements run
 * between two of them. (With the import in one transaction on the one embedded session, the list
 * waits for its end: the test goes red.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InsertQueryNode, sql, type KyselyPlugin } from 'kysely';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { writeCommits } from '../../src/db/write-clock.ts';

const ROWS = 4000;

describe.each(backends)('large CSV import keeps the server answering (%s)', (backend) => {
  let database: TestDatabase;
  let app: App;
  let base: string;
  let admin: Record<string, string>;
  let reader: Record<string, string>;
  const phase = { movementsWritten: false, committed: false, holdForProgress: false };
  // Log lines of the app (progress lines among them), and a wake-up for each.
  const lines: { task?: string; msg?: string; progress?: { phase?: string; done: number; total: number } }[] = [];
  let lineLogged = () => {};
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      lineLogged();
      done();
    },
  });
  // One transaction reports its phases; steps (the embedded database) report checked skus and steps.
  const progressLine = () => lines.find((l) => l.task === 'stock import' && l.progress !== undefined && l.progress.phase !== 'reading the CSV');
  const probe: KyselyPlugin = {
    transformQuery(args) {
      const node = args.node;
      if (InsertQueryNode.is(node) && node.into?.table.identifier.name === 'stock_movements') phase.movementsWritten = true;
      return node;
    },
    transformResult: async (args) => {
      // Hold the import after its first movements until a progress line says so.
      if (phase.holdForProgress && phase.movementsWritten) {
        phase.holdForProgress = false;
        await new Promise<void>((resolve) => {
          lineLogged = () => {
            if (progressLine()) resolve();
          };
          lineLogged();
        });
      }
      return args.result;
    },
  };

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    await sql`INSERT INTO products (id, name, slug, product_type, sku, price, created_at, last_modified)
      SELECT gen_random_uuid(), 'Import ' || i, 'import-' || i, 'physical', 'IMP-' || i, 1, now(), now()
      FROM generate_series(1, ${ROWS}::int) AS i`.execute(database.db);
    const config = loadConfig({ LOG_LEVEL: 'info', SEED_DEMO: 'false', PROGRESS_LOG_INTERVAL_MS: '10' });
    app = await buildApp({ config, database: { ...database, db: database.db.withPlugin(probe) }, logger: pino({ level: 'info' }, logStream) });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    admin = { authorization: `Bearer ${(await createToken(database.db, { name: 'import', scopes: ['admin'] })).token}` };
    reader = { authorization: `Bearer ${(await createToken(database.db, { name: 'reader' })).token}` };
  });
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  const importCsv = (csv: string) =>
    fetch(`${base}/admin/api/v1/inventory/import`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'text/csv' },
      body: csv,
    });
  const csvOf = (rows: string[]) => `sku,stock\n${rows.join('\n')}\n`;

  it('answers /healthz while the import transaction is in progress, and applies every row', async () => {
    const onCommit = () => {
      if (phase.movementsWritten) phase.committed = true;
    };
    writeCommits.on('commit', onCommit);
    try {
      const importing = importCsv(csvOf(Array.from({ length: ROWS }, (_, i) => `IMP-${i + 1},${i + 7}`)));
      let finished = false;
      const imported = importing.then((r) => {
        finished = true;
        return r;
      });
      let answeredDuringTransaction = 0;
      // A few answers inside the transaction prove it; asking on (the database is in its own thread,
      // so answers come back to back) would only take cores from the import.
      while (!finished && answeredDuringTransaction < 3) {
        const health = await fetch(`${base}/healthz`);
        expect(health.status).toBe(200);
        await health.arrayBuffer();
        if (phase.movementsWritten && !phase.committed) answeredDuringTransaction += 1;
      }
      const res = await imported;
      expect(res.status).toBe(201);
      expect((await res.json()).data).toEqual({ rows: ROWS, movements: ROWS, products: ROWS });
      expect(phase.committed).toBe(true);
      expect(answeredDuringTransaction).toBeGreaterThan(0);
    } finally {
      writeCommits.off('commit', onCommit);
    }
    const { rows } = await sql<{ n: number; wrong: number }>`
      SELECT count(*)::int AS n, count(*) FILTER (WHERE stock <> substring(sku from 5)::int + 6)::int AS wrong
      FROM products WHERE sku LIKE 'IMP-%'`.execute(database.db);
    expect(rows[0]).toEqual({ n: ROWS, wrong: 0 });
  });

  it('answers a products list asked during the import before the import ends', async () => {
    phase.movementsWritten = false;
    const importing = importCsv(csvOf(Array.from({ length: ROWS }, (_, i) => `IMP-${i + 1},${i + 11}`)));
    let importAnswered = false;
    const imported = importing.then((r) => {
      importAnswered = true;
      return r;
    });
    // Wait (turns of the event loop, no guessed sleep) for the import's first movements.
    while (!phase.movementsWritten && !importAnswered) await new Promise((resolve) => setImmediate(resolve));
    const list = await fetch(`${base}/api/v1/products?limit=200`, { headers: reader });
    const listedBeforeImportEnded = !importAnswered;
    expect(list.status).toBe(200);
    const page = (await list.json()) as { data: { sku: string; stock: number }[] };
    expect(page.data).toHaveLength(200);
    const res = await imported;
    expect(res.status).toBe(201);
    expect(listedBeforeImportEnded).toBe(true);
    // Every product of the page shows its old or its new level, never anything else.
    for (const p of page.data.filter((x) => x.sku.startsWith('IMP-'))) {
      const n = Number(p.sku.slice(4));
      expect([n + 6, n + 10]).toContain(p.stock);
    }
  });

  it('a client that disconnects mid-import leaves the import whole and no statement running', async () => {
    phase.movementsWritten = false;
    const from = lines.length;
    const done = () => lines.slice(from).some((l) => l.task === 'stock import' && /done in/.test(l.msg ?? '') && (l as { rows?: number }).rows === ROWS);
    const gone = new AbortController();
    const importing = fetch(`${base}/admin/api/v1/inventory/import`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'text/csv' },
      body: csvOf(Array.from({ length: ROWS }, (_, i) => `IMP-${i + 1},${i + 21}`)),
      signal: gone.signal,
    }).catch((error: unknown) => error);
    while (!phase.movementsWritten) await new Promise((resolve) => setImmediate(resolve));
    gone.abort();
    expect(await importing).toBeInstanceOf(Error);
    // The import goes on to its end (its last progress line), then its request ends.
    await new Promise<void>((resolve) => {
      lineLogged = () => {
        if (done()) resolve();
      };
      lineLogged();
    });
    // Nothing half-written: every product has the new level (the steps, or the one transaction
    // committed) or every product the old one (the one transaction rolled back).
    const { rows } = await sql<{ updated: number }>`
      SELECT count(*) FILTER (WHERE stock = substring(sku from 5)::int + 20)::int AS updated FROM products WHERE sku LIKE 'IMP-%'`.execute(database.db);
    expect([0, ROWS]).toContain(rows[0]!.updated);
    if (backend === 'postgres') {
      // No statement of the app still running on the server once the request has ended.
      const running = async () =>
        (
          await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND state NOT IN ('idle')`.execute(database.db)
        ).rows[0]!.n;
      for (let i = 0; i < 200 && (await running()) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 25));
      expect(await running()).toBe(0);
    }
  });

  it('a large import logs how far it got while it runs, and when it ended', async () => {
    phase.movementsWritten = false;
    phase.holdForProgress = true;
    const res = await importCsv(csvOf(Array.from({ length: ROWS }, (_, i) => `IMP-${i + 1},${i + 3}`)));
    expect(res.status).toBe(201);
    expect(progressLine()).toMatchObject({ msg: expect.stringMatching(/^stock import: [a-z ]+ \d+\/\d+ \(/), progress: { total: expect.any(Number) } });
    expect(lines.find((l) => l.task === 'stock import' && /done in/.test(l.msg ?? ''))).toMatchObject({ rows: ROWS, movements: ROWS });
  });

  it('a large import with one bad row changes nothing', async () => {
    const before = await sql<{ n: number }>`SELECT count(*)::int AS n FROM stock_movements`.execute(database.db);
    const rows = Array.from({ length: ROWS }, (_, i) => `IMP-${i + 1},1`);
    rows.push('IMP-NOPE,1');
    const res = await importCsv(csvOf(rows));
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain(`line ${ROWS + 2}`);
    const after = await sql<{ n: number }>`SELECT count(*)::int AS n FROM stock_movements`.execute(database.db);
    expect(after.rows[0]!.n).toBe(before.rows[0]!.n);
    const changed = await sql<{ n: number }>`SELECT count(*)::int AS n FROM products WHERE sku LIKE 'IMP-%' AND stock = 1`.execute(database.db);
    expect(changed.rows[0]!.n).toBe(0);
  });
});
