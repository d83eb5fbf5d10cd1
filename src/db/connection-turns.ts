/**
 * The turns of the embedded database's single connection (PGlite; decisions 0036, 0042). Every
 * statement outside a transaction, and every transaction, takes a turn; one turn holds the
 * connection at a time. Two kinds of waiters:
 *
 *  - statements: everything by default (requests' reads and writes, the webhook worker, commands),
 *    served first come, first served;
 *  - steps: the committed steps of a long write, marked by running it inside `runGivingWay` (the
 *    stock import's steps). A step gives way to statements.
 *
 * States of the connection:
 *  - free: no turn holds it. A waiting statement takes it at once. A waiting step takes it only
 *    after the event loop has turned once with the connection still free and no statement waiting
 *    (`stepPending`): a read of several statements (a products list: its read horizon, then its page)
 *    queues its next statement in the microtasks that follow the previous one's answer, so by then
 *    it is waiting and goes before the step.
 *  - held: a turn holds it; waiters queue. When it ends: the oldest statement, else (after that turn
 *    of the event loop) the oldest step.
 *
 * So a read asked while a step runs waits for that step only, never for the next one, whatever its
 * number of statements. A step is not starved: once STEP_GIVES_WAY_TURNS statements' turns have
 * been taken while a step waited, the step goes next.
 *
 * On a database with many connections (PostgreSQL) there are no turns: `runGivingWay` changes
 * nothing there (its readers pass a long write by MVCC on connections of their own).
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** Turns of other statements a waiting step lets pass before it goes next (no starvation under constant reads). */
export const STEP_GIVES_WAY_TURNS = 32;

export type TurnKind = 'statement' | 'step';

const givingWay = new AsyncLocalStorage<true>();

/**
 * Runs `fn` so that the connection turns it takes (its transactions and statements) give way to
 * every other statement waiting: a long write in committed steps lets reads pass between its steps.
 */
export function runGivingWay<T>(fn: () => Promise<T>): Promise<T> {
  return givingWay.run(true, fn);
}

/** The kind of turn a caller in the current async context takes. */
export function currentTurnKind(): TurnKind {
  return givingWay.getStore() ? 'step' : 'statement';
}

/** One holder at a time, statements before steps (see the file's comment). */
export class ConnectionTurns {
  #held = false;
  readonly #statements: (() => void)[] = [];
  readonly #steps: (() => void)[] = [];
  /** Statements' turns granted since a step began to wait. */
  #passedOver = 0;
  /** A check for a step is scheduled for the next turn of the event loop. */
  #stepPending = false;

  /** Resolves once it is the caller's turn, with the function that ends it (idempotent). */
  take(kind: TurnKind = currentTurnKind()): Promise<() => void> {
    return new Promise((resolve) => {
      const grant = () => {
        this.#held = true;
        let ended = false;
        resolve(() => {
          if (ended) return;
          ended = true;
          this.#held = false;
          this.#next();
        });
      };
      (kind === 'step' ? this.#steps : this.#statements).push(grant);
      this.#next();
    });
  }

  #next(): void {
    if (this.#held) return;
    const stepFirst = this.#steps.length > 0 && this.#passedOver >= STEP_GIVES_WAY_TURNS;
    if (this.#statements.length > 0 && !stepFirst) {
      if (this.#steps.length > 0) this.#passedOver += 1;
      this.#statements.shift()!();
      return;
    }
    if (this.#steps.length === 0) return;
    if (stepFirst) {
      this.#grantStep();
      return;
    }
    // No statement waits now: give a read that just ended one turn of the event loop to ask for its
    // next statement before the step takes the connection.
    if (this.#stepPending) return;
    this.#stepPending = true;
    setImmediate(() => {
      this.#stepPending = false;
      if (this.#held) return;
      if (this.#statements.length > 0) this.#next();
      else if (this.#steps.length > 0) this.#grantStep();
    });
  }

  #grantStep(): void {
    this.#passedOver = 0;
    this.#steps.shift()!();
  }
}
