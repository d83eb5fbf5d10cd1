/**
 * The breaker against a claim that raced the failure opening it: a claim statement that started
 * before the settle of the threshold-th failure committed reads the endpoint as still closed and
 * brings one of its deliveries back after the breaker opened. The worker must hand that delivery
 * back unsent: sending it would be one attempt past the threshold (CI saw consecutive_failures 11
 * for a threshold of 10 once, with claims reaching far ahead).
 *
 * The race is made certain, not waited for: the worker runs on the test database through a Kysely
 * plugin that marks a claim statement that returned rows, and the claim's transaction (its own,
 * db/index-reads.ts) holds them, once committed, until the test has seen the breaker open; the
 * receiver holds its answer to the threshold-th attempt until that claim has run. Held after the
 * commit, not inside the transaction: the embedded database's one connection would wait for itself.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type {
  Kysely,
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryId,
  QueryResult,
  RootOperationNode,
  Transaction,
  UnknownRow,
} from 'kysely';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import type { Database } from '../../src/db/schema.ts';
import { startWebhookWorker, type AttemptReport, type WebhookWorker } from '../../src/webhooks/webhook-worker.ts';
import { WebhookReceiver } from './webhook-receiver.ts';
import { webhookTestKit, waitForAttempts, type WebhookTestKit } from './webhook-test-kit.ts';

const THRESHOLD = 3;

/** Holds the rows of the next claim that returns any, once armed, until released: after its transaction commits. */
class ClaimGate implements KyselyPlugin {
  armed = false;
  readonly #claims = new WeakSet<QueryId>();
  /** The transaction running, for the statements run in it. */
  readonly #transaction = new AsyncLocalStorage<{ claimed: boolean }>();
  #held: (() => void) | undefined;
  #release!: () => void;
  readonly released = new Promise<void>((resolve) => {
    this.#release = resolve;
  });
  readonly heldOne: Promise<void>;
  constructor() {
    this.heldOne = new Promise((resolve) => {
      this.#held = resolve;
    });
  }
  transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
    // The claim statement (delivery-queue.ts claimDueDeliveries): the only one with a probe_rows part.
    if (node.kind === 'RawNode' && node.sqlFragments.join('').includes('probe_rows AS')) this.#claims.add(queryId);
    return node;
  }
  async transformResult({ result, queryId }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    const transaction = this.#transaction.getStore();
    if (this.armed && this.#held && this.#claims.has(queryId) && result.rows.length > 0 && transaction) transaction.claimed = true;
    return result;
  }
  /** `db` with this plugin, each of its transactions held after its commit when it claimed rows while armed. */
  gate(db: Kysely<Database>): Kysely<Database> {
    const plugged = db.withPlugin(this);
    return new Proxy(plugged, {
      get: (target, property) => {
        if (property === 'transaction')
          return () => {
            const builder = target.transaction();
            const execute = builder.execute.bind(builder);
            builder.execute = async <T>(callback: (trx: Transaction<Database>) => Promise<T>): Promise<T> => {
              const state = { claimed: false };
              const result = await this.#transaction.run(state, () => execute(callback));
              if (state.claimed && this.#held) {
                this.#held();
                this.#held = undefined;
                await this.released;
              }
              return result;
            };
            return builder;
          };
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }
  release(): void {
    this.#release();
  }
}

describe.each(backends)('breaker against a racing claim (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  let worker: WebhookWorker;
  const gate = new ClaimGate();

  beforeAll(async () => {
    kit = await webhookTestKit(
      backend,
      {
        WEBHOOK_BREAKER_THRESHOLD: String(THRESHOLD),
        WEBHOOK_BREAKER_PAUSE_MS: '600000',
        WEBHOOK_ENDPOINT_CONCURRENCY: '1',
        WEBHOOK_RETRY_SCHEDULE_MS: '600000,600000,600000,600000,600000',
      },
      { worker: false },
    );
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    gate.release();
    await worker?.stop();
    await kit?.close();
    await receiver?.close();
  });

  it('hands back unsent a delivery claimed before the failure that opened the breaker', async () => {
    const endpoint = await kit.createEndpoint(receiver.url);
    let fourthPing: Promise<string> | undefined;
    receiver.respond = (_req, n, res) => {
      if (n !== THRESHOLD) return void res.writeHead(500).end('down');
      // The threshold-th attempt is in flight, the breaker still closed: a delivery queued now is
      // claimed by a statement that reads the endpoint closed; only then does this attempt fail.
      gate.armed = true;
      fourthPing = kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`).then((r) => r.body.data.delivery_id as string);
      void gate.heldOne.then(() => res.writeHead(500).end('down'));
    };
    for (let i = 0; i < THRESHOLD; i++) await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);

    const db = gate.gate(kit.t.database.db);
    worker = await startWebhookWorker({ ...kit.t.ctx, database: { ...kit.t.ctx.database, db } }, { listenUrl: kit.t.database.url });
    const attempts: AttemptReport[] = [];
    worker.events.on('attempt', (r) => attempts.push(r));
    await waitForAttempts(worker, THRESHOLD, (r) => r.endpointId === endpoint.id);
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data).toMatchObject({ state: 'paused', consecutive_failures: THRESHOLD });

    // The breaker is open; the racing claim's rows arrive now.
    gate.release();
    const raced = await fourthPing!;
    // Its delivery ends unlocked either way: handed back, or sent and settled. Which one it was
    // shows in its attempt count and in the endpoint's failures.
    for (;;) {
      const { rows } = await sql<{ locked_by: string | null }>`SELECT locked_by FROM webhook_deliveries WHERE id = ${raced}`.execute(kit.t.database.db);
      if (rows[0]?.locked_by === null) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const delivery = (await kit.api('GET', `/webhooks/deliveries/${raced}`)).body.data;
    expect(delivery).toMatchObject({ status: 'pending', attempt_count: 0 });
    expect(receiver.requests).toHaveLength(THRESHOLD);
    expect(attempts.filter((r) => r.endpointId === endpoint.id)).toHaveLength(THRESHOLD);
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data).toMatchObject({ state: 'paused', consecutive_failures: THRESHOLD });
  });
});
