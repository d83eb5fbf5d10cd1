/**
 * Chaos: while concurrent writers change the store, the sync tool's receiver fails at random and is
 * down in windows, and the worker (PGlite: the whole service) is SIGKILLed and restarted, the mirror
 * loses nothing: before the reconcile only records of dead-lettered events may differ; after it the
 * mirror equals the store record for record (verify), and every event was delivered (and is in the
 * mirror's log) or is in the dead letter queue. See chaos-harness.ts for the whole run.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { openMirror, type MirrorDatabase } from '../../packages/sync/src/index.ts';
import { runChaos } from './chaos-harness.ts';

function summary0(report: Awaited<ReturnType<typeof runChaos>>) {
  return {
    writes: report.writes,
    receiver: report.receiver,
    events: report.events,
    delivered: report.delivered,
    dead: report.deadLetters,
    duplicates: report.duplicates,
    seconds: report.seconds,
  };
}

describe.each(backends)('sync chaos (%s)', (backend) => {
  const opened: { close(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const handle of opened.reverse()) await handle.close();
  });

  it('after chaos and a reconcile the mirror equals the store; every event delivered or dead-lettered', async () => {
    let service: TestDatabase | undefined;
    let mirror: MirrorDatabase;
    if (backend === 'postgres') {
      service = await openTestDatabase('postgres');
      opened.push(service);
      const mirrorDb = await openTestDatabase('postgres');
      opened.push(mirrorDb);
      mirror = await openMirror({ databaseUrl: mirrorDb.url });
    } else {
      mirror = await openMirror({});
    }
    opened.push(mirror);

    const report = await runChaos({
      backend,
      databaseUrl: service?.url,
      mirror,
      products: 200,
      durationMs: 10_000,
      writers: 4,
      kills: 2,
      log: (line) => process.stderr.write(`[chaos ${backend}] ${line}\n`),
    });
    process.stderr.write(`[chaos ${backend}] ${JSON.stringify({ ...summary0(report) })}\n`);
    const summary = {
      writes: report.writes,
      receiver: report.receiver,
      events: report.events,
      delivered: report.delivered,
      dead: report.deadLetters,
      duplicates: report.duplicates,
      reconcile: report.reconcile,
    };

    // The initial sync took each resource from one snapshot stream: its cursor is the snapshot's end cursor.
    for (const [resource, cursor] of Object.entries(report.initialCursors)) expect(cursor, resource).toMatch(/_00000000-0000-0000-0000-000000000000$/);

    // The chaos happened: writes of every kind, failed answers, redeliveries, kills.
    expect(report.kills, JSON.stringify(summary)).toBe(2);
    expect(report.writes['order-placed'] ?? 0).toBeGreaterThan(0);
    expect(report.writes['csv-import'] ?? 0).toBeGreaterThan(0);
    expect(report.receiver.error500 + report.receiver.swallowed + report.receiver.refused).toBeGreaterThan(0);
    expect(report.events).toBeGreaterThan(100);

    // Nothing lost on the way.
    expect(report.undelivered, 'events neither delivered nor dead-lettered').toEqual([]);
    expect(report.lostEvents, 'delivered events the mirror never recorded').toEqual([]);
    expect(report.delivered + report.deadLetters).toBe(report.events);
    expect(
      report.unexplainedBeforeReconcile,
      `records differing before the reconcile with no dead letter to explain them: ${JSON.stringify(report.unexplainedDetail, null, 1)}`,
    ).toEqual({});

    // And after the reconcile, record for record.
    for (const r of report.afterReconcile) {
      expect({ resource: r.resource, missing: r.missing, extra: r.extra, different: r.different }).toEqual({
        resource: r.resource,
        missing: [],
        extra: [],
        different: [],
      });
      expect(r.mirrorChecksum).toBe(r.apiChecksum);
    }
    expect(report.recordsCompared).toBeGreaterThan(200);
  }, 600_000);
});
