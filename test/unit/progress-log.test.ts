/**
 * Progress lines of long work (shared/progress-log.ts): a line per interval with where the
 * work is, a last one with the time taken, and nothing at all for work that ends before the first.
 */
import { describe, expect, it } from 'vitest';
import { progressLog, withProgressLog } from '../../src/shared/progress-log.ts';

function sink() {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  let wake = () => {};
  return {
    lines,
    logger: {
      info: (fields: Record<string, unknown>, msg: string) => {
        lines.push({ fields, msg });
        wake();
      },
    } as never,
    /** Resolves once `n` lines have been logged. */
    until: (n: number) =>
      new Promise<void>((resolve) => {
        wake = () => lines.length >= n && resolve();
        wake();
      }),
  };
}

describe('progress lines', () => {
  it('logs where the work is every interval, then that it ended', async () => {
    const out = sink();
    const progress = progressLog(out.logger, 'seeding the demo store', { intervalMs: 10 });
    progress.update(4000, 20000, 'products');
    await out.until(1);
    progress.update(8000, 20000, 'products');
    await out.until(2);
    progress.stop({ products: 20000 });
    expect(out.lines[0]).toMatchObject({
      fields: { task: 'seeding the demo store', progress: { done: 4000, total: 20000, phase: 'products' } },
      msg: expect.stringMatching(/^seeding the demo store: products 4000\/20000 \(\d+(\.\d)? s so far\)$/),
    });
    expect(out.lines.at(-2)?.msg).toMatch(/products 8000\/20000/);
    expect(out.lines.at(-1)).toMatchObject({ fields: { task: 'seeding the demo store', products: 20000 }, msg: expect.stringMatching(/: done in /) });
  });

  it('says it is still working before any progress is known', async () => {
    const out = sink();
    let finish = () => {};
    const work = withProgressLog(out.logger, 'opening the database', () => new Promise<void>((resolve) => (finish = resolve)), { intervalMs: 10 });
    await out.until(1);
    finish();
    await work;
    expect(out.lines[0]?.msg).toMatch(/^opening the database: still working \(/);
    expect(out.lines.at(-1)?.msg).toMatch(/^opening the database: done in /);
  });

  it('logs nothing for work that ends before the first interval', async () => {
    const out = sink();
    await withProgressLog(out.logger, 'migrating the database schema', async () => {}, { intervalMs: 3_600_000 });
    expect(out.lines).toEqual([]);
  });
});
