/**
 * The turns of the embedded database's one connection (db/connection-turns.ts, decision 0042):
 * statements go before the steps of a long write, a read's next statement asked right after its
 * previous one ended still goes before a waiting step, and a step is not starved by a stream of
 * statements. Pure: no database, the order of grants observed, turns of the event loop awaited.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionTurns, STEP_GIVES_WAY_TURNS, currentTurnKind, runGivingWay } from '../../src/db/connection-turns.ts';

const loopTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Notes `name` in `order` when its turn is granted, and hands on the turn's end. */
const noting =
  (order: string[], name: string) =>
  (end: () => void): (() => void) => {
    order.push(name);
    return end;
  };

describe('connection turns', () => {
  it('statements asked while a step waits go first, first come first served; then the step', async () => {
    const turns = new ConnectionTurns();
    const order: string[] = [];
    const endFirst = await turns.take('statement');
    const step = turns.take('step').then(noting(order, 'step'));
    const a = turns.take('statement').then(noting(order, 'a'));
    const b = turns.take('statement').then(noting(order, 'b'));
    endFirst();
    (await a)();
    (await b)();
    (await step)();
    expect(order).toEqual(['a', 'b', 'step']);
  });

  it("a read's next statement, asked as its previous one ends, goes before a waiting step", async () => {
    const turns = new ConnectionTurns();
    const order: string[] = [];
    const endHorizon = await turns.take('statement');
    const step = turns.take('step').then(noting(order, 'step'));
    // As a list does: its page is asked in the microtasks after its horizon's turn ends.
    const page = Promise.resolve()
      .then(() => endHorizon())
      .then(() => turns.take('statement'))
      .then(noting(order, 'page'));
    (await page)();
    (await step)();
    expect(order).toEqual(['page', 'step']);
  });

  it('a step waits for the connection to be free a whole turn of the event loop, and then takes it', async () => {
    const turns = new ConnectionTurns();
    let granted = false;
    const step = turns.take('step').then((end) => {
      granted = true;
      return end;
    });
    await Promise.resolve();
    expect(granted).toBe(false);
    await loopTurn();
    await loopTurn();
    expect(granted).toBe(true);
    (await step)();
  });

  it(`a step lets at most ${STEP_GIVES_WAY_TURNS} statements pass, then goes next`, async () => {
    const turns = new ConnectionTurns();
    const order: string[] = [];
    let end = await turns.take('statement');
    const step = turns.take('step').then(noting(order, 'step'));
    // A statement always waiting: each holder asks for the next one before ending its turn.
    for (let i = 0; i <= STEP_GIVES_WAY_TURNS; i++) {
      const next = turns.take('statement').then(noting(order, `s${i}`));
      end();
      if (i === STEP_GIVES_WAY_TURNS) (await step)();
      end = await next;
    }
    end();
    expect(order.indexOf('step')).toBe(STEP_GIVES_WAY_TURNS);
  });

  it('runGivingWay makes the turns taken inside it steps, and only there', async () => {
    expect(currentTurnKind()).toBe('statement');
    const inside = await runGivingWay(async () => {
      await loopTurn();
      return currentTurnKind();
    });
    expect(inside).toBe('step');
    expect(currentTurnKind()).toBe('statement');
  });
});
