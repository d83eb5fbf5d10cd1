/**
 * What a worker keeps per endpoint follows the endpoints it is busy with, not every endpoint it has
 * ever delivered to: past its bound of idle endpoints remembered (their learned limits), the oldest
 * are forgotten, and neither the worker's state nor what its claims and hand-overs send to the
 * database grows with the endpoints of every store. A forgotten endpoint is served as a new one.
 * And the receivers' pools kept (WEBHOOK_ORIGINS_KEPT): deliveries going round more origins than
 * that open a connection each time, fewer keep theirs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { observeStatements } from '../../src/db/store-scope.ts';
import { startWebhookWorker } from '../../src/webhooks/webhook-worker.ts';
import { WebhookReceiver } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const REMEMBERED = 2;
const ENDPOINTS = 8;

/** The most endpoint ids any JSON object parameter of the claim and fan-out statements names. */
function mostEndpointsNamed(parameters: readonly unknown[]): number {
  let most = 0;
  for (const p of parameters) {
    if (typeof p !== 'string' || !p.startsWith('{')) continue;
    const keys = Object.keys(JSON.parse(p) as object);
    most = Math.max(most, keys.length);
  }
  return most;
}

describe.each(backends)('idle endpoints a worker remembers (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, { WEBHOOK_BREAKER_THRESHOLD: '1000' }, { worker: false });
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    observeStatements(undefined);
    await kit?.close();
    await receiver?.close();
  });

  it('forgets the oldest idle endpoints past its bound: claims name only those it holds or remembers', async () => {
    const worker = await startWebhookWorker(kit.t.ctx, { listenUrl: kit.t.database.url, idleEndpointsRemembered: REMEMBERED });
    try {
      const endpoints: { id: string; secret: string }[] = [];
      for (let i = 0; i < ENDPOINTS; i++) endpoints.push(await kit.createEndpoint(`${receiver.url}/e${i}`));
      // One delivery to each endpoint in turn, each answered fast (a learned state that differs
      // from a new endpoint's, which the claims would carry for every endpoint remembered).
      for (const endpoint of endpoints) {
        const attempt = waitForAttempts(worker, 1, (r) => r.endpointId === endpoint.id);
        expect((await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).status).toBe(202);
        expect((await attempt)[0]!.settlement?.status).toBe('succeeded');
      }
      let named = 0;
      let statements = 0;
      observeStatements((text, parameters) => {
        if (!text.includes('jsonb ->>')) return;
        statements += 1;
        named = Math.max(named, mostEndpointsNamed(parameters));
      });
      // The first endpoint was forgotten long ago: it is delivered to as a new one.
      const again = waitForAttempts(worker, 1, (r) => r.endpointId === endpoints[0]!.id);
      expect((await kit.api('POST', `/webhooks/endpoints/${endpoints[0]!.id}/ping`)).status).toBe(202);
      expect((await again)[0]!.settlement?.status).toBe('succeeded');
      observeStatements(undefined);
      expect(statements).toBeGreaterThan(0);
      // Those remembered, and the one delivery held while it was claimed, not all eight.
      expect(named).toBeLessThanOrEqual(REMEMBERED + 1);
    } finally {
      observeStatements(undefined);
      await worker.stop();
    }
  });
});

describe.each(backends)('receivers whose pools a worker keeps (%s)', (backend) => {
  /** Connections each of two receivers saw while their endpoints were pinged in turn, three times each. */
  async function connectionsInTurn(env: Record<string, string>): Promise<number[]> {
    const kit = await webhookTestKit(backend, env);
    const receivers = [await new WebhookReceiver().start(), await new WebhookReceiver().start()];
    try {
      const endpoints = [await kit.createEndpoint(receivers[0]!.url), await kit.createEndpoint(receivers[1]!.url)];
      for (let round = 0; round < 3; round++) {
        for (const endpoint of endpoints) {
          const attempt = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
          expect((await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).status).toBe(202);
          expect((await attempt)[0]!.settlement?.status).toBe('succeeded');
        }
      }
      return receivers.map((r) => r.connections.size);
    } finally {
      await kit.close();
      for (const r of receivers) await r.close();
    }
  }

  it("keeps both origins' connections by default", async () => {
    for (const n of await connectionsInTurn({})) expect(n).toBeLessThan(3);
  });

  it("with WEBHOOK_ORIGINS_KEPT=1 closes one origin's pool for the other: a connection per delivery", async () => {
    expect(await connectionsInTurn({ WEBHOOK_ORIGINS_KEPT: '1' })).toEqual([3, 3]);
  });
});
