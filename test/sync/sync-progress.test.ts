import { describe, expect, it } from 'vitest';
import { progressDetail } from '../../packages/sync/src/cli/progress.ts';

// The text after each progress bar of `store-api-sync init` (packages/sync/src/cli/progress.ts).
describe('store-api-sync progress text', () => {
  it('gives the percentage, the total and an ETA at the rate seen since the first report', () => {
    // 500 records in 10 s since the first report at 500: 50/s, 1500 left → 30 s.
    expect(progressDetail({ records: 1000, total: 2500, done: false, since: { records: 500, elapsedMs: 10_000 } })).toBe(
      '40% (1000 of 2500 records), ETA 30 s',
    );
    // 100 records a minute, 9000 left → 90 min.
    expect(progressDetail({ records: 1000, total: 10_000, done: false, since: { records: 900, elapsedMs: 60_000 } })).toBe(
      '10% (1000 of 10000 records), ETA 1 h 30 min',
    );
    expect(progressDetail({ records: 200, total: 1000, done: false, since: { records: 0, elapsedMs: 40_000 } })).toBe(
      '20% (200 of 1000 records), ETA 2 min 40 s',
    );
  });

  it('says the ETA is unknown before a rate is seen, and never passes 100%', () => {
    expect(progressDetail({ records: 500, total: 2000, done: false, since: { records: 500, elapsedMs: 0 } })).toBe('25% (500 of 2000 records), ETA unknown');
    // Records created after the count arrive too (a resumed or busy stream): capped, ETA 0.
    expect(progressDetail({ records: 1010, total: 1000, done: false, since: { records: 0, elapsedMs: 1000 } })).toBe('100% (1010 of 1000 records), ETA 0 s');
  });

  it('shows the count alone when the server announced no total (the exports of an older server), and done at the end', () => {
    expect(progressDetail({ records: 1500, total: null, done: false, since: { records: 500, elapsedMs: 1000 } })).toBe('1500 records, syncing');
    expect(progressDetail({ records: 2500, total: 2500, done: true, since: { records: 500, elapsedMs: 1000 } })).toBe('2500 records, done');
  });
});
