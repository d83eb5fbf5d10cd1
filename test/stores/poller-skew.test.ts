/**
 * The poll's fan-out probes an endpoint's due deliveries by its index however the deliveries are
 * spread over the stores (its transaction reads by index only, db/index-reads.ts). With one store
 * holding nearly every delivery (a backlog of due deliveries to a failing endpoint), the statistics
 * say a store id matches nearly every row, and PostgreSQL's planner answered "does store B's endpoint have a due
 * delivery?" with a sequential scan of the whole table, expecting to stop at the first match and
 * finding none: 35 ms of a 43-ms fan-out of one of B's events in the stores bench.
 *
 * The plan is read the way the poll runs it: the poll's own statements are recorded, then its first
 * statement (which sets the transaction's planner settings) and an EXPLAIN of its fan-out are run
 * in one transaction.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aStoreWithEndpoint } from '../helpers/store-fixtures.ts';
import { planAsRun, recordStatements, settingsOf, wholeReadsOf } from '../helpers/plan-as-run.ts';
import type { Database } from '../../src/db/schema.ts';
import { asPlatform, inStore } from '../../src/db/store-scope.ts';
import { runWrite } from '../../src/db/write-clock.ts';
import { appendEvent, appendEventsInOrder } from '../../src/events/event-log.ts';
import { pollEvents, type Handover } from '../../src/webhooks/event-poller.ts';

/** A's deliveries: enough that the planner picks a sequential scan without the setting (seen failing so). */
const BACKLOG = 20_000;

describe.each(backends)("the poll's fan-out with one store holding nearly every delivery (%s)", (backend) => {
  let t: TestApp;
  let db: Kysely<Database>;

  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = t.database.db;
  });
  afterAll(async () => {
    await t?.close();
  });

  const aStore = (name: string) => aStoreWithEndpoint(db, name);

  const handover: Handover = {
    workerId: 'skew-test',
    leaseMs: 60_000,
    limit: 10,
    freeSlots: new Map(),
    held: new Map(),
    endpointCapacity: 4,
    breaker: { threshold: 10, pauseMs: 60_000 },
  };

  it("probes store B's endpoint by its index while store A has 20,000 due deliveries", async () => {
    const a = await aStore('a');
    const b = await aStore('b');
    // A's backlog: its events fanned out, every delivery due (its endpoint failing, say).
    await inStore(a.id, () =>
      runWrite(db, (w) =>
        appendEventsInOrder(w, [
          {
            type: 'product.updated',
            source: sql`SELECT gen_random_uuid()::text AS resource_id, json_build_object('n', g) AS data FROM generate_series(1, ${BACKLOG}) g`,
          },
        ]),
      ),
    );
    for (let i = 0; i < 1000; i++) if (!(await asPlatform(() => pollEvents(db, Date.now(), 500))).more) break;
    await asPlatform(async () => {
      await sql`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '1 minute' WHERE store_id = ${a.id}::uuid`.execute(db);
    });
    // Outside any store's scope: as the tables' owner (a store's role may not analyse them).
    await sql`ANALYZE webhook_deliveries`.execute(db);
    const backlog = await asPlatform(
      async () => (await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE store_id = ${a.id}::uuid`.execute(db)).rows[0]!.n,
    );
    expect(backlog).toBe(BACKLOG);

    // One event of B, fanned out with a handover (the path with the due-delivery probe), recorded.
    await inStore(b.id, () => runWrite(db, (w) => appendEvent(w, 'product.updated', randomUUID(), { b: true })));
    const { result: polled, statements } = await recordStatements(() => pollEvents(db, Date.now(), 500, () => handover));
    expect(polled.handedOver.map((d) => d.endpointId)).toEqual([b.endpoint]);

    // The transaction's first statement sets the planner's settings; the fan-out is planned after it.
    const settings = settingsOf(statements);
    const fanOut = statements.find((s) => s.sql.includes('INSERT INTO webhook_deliveries'));
    expect(settings && fanOut).toBeTruthy();
    expect(wholeReadsOf(await planAsRun(db, settings, fanOut!), ['webhook_deliveries'])).toEqual([]);
  });
});
