/**
 * The webhook client's per-request timeouts without a timer per request (Deadlines): each request
 * is aborted exactly when its own timeout has passed — not at an earlier request's, not later —
 * whatever finished around it, and nothing is left armed once every request has finished.
 * Fake timers and a fake clock: no real waiting.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Deadlines } from '../../src/webhooks/webhook-http-client.ts';

const TIMEOUT = 1000;

describe('webhook request deadlines', () => {
  let clock = 0;
  let deadlines: Deadlines;
  beforeEach(() => {
    vi.useFakeTimers();
    clock = 0;
    deadlines = new Deadlines(TIMEOUT, () => clock);
  });
  afterEach(() => vi.useRealTimers());

  /** Moves the fake clock and the fake timers together. */
  const advance = (ms: number) => {
    clock += ms;
    vi.advanceTimersByTime(ms);
  };
  /** A deadline as undici sees it: an abort listener registered through once(). */
  const request = () => {
    const deadline = deadlines.start();
    const aborted = { at: null as number | null };
    deadline.once('abort', () => {
      aborted.at = clock;
    });
    return { deadline, aborted };
  };

  it('a request started later times out at its own deadline, after an earlier one finished', () => {
    const a = request();
    advance(400);
    const b = request();
    advance(100);
    deadlines.finish(a.deadline);
    advance(500); // t = 1000: a's deadline, a is done
    expect(a.aborted.at).toBeNull();
    expect(b.aborted.at).toBeNull();
    advance(399); // t = 1399
    expect(b.aborted.at).toBeNull();
    advance(1); // t = 1400 = 400 + TIMEOUT
    expect(b.aborted.at).toBe(1400);
    expect(b.deadline.expired).toBe(true);
    expect(b.deadline.reason?.name).toBe('TimeoutError');
  });

  it('requests that hang each time out at their own moment, and a finished one never does', () => {
    const c = request();
    advance(100);
    const d = request();
    advance(50);
    const e = request();
    deadlines.finish(e.deadline);
    advance(850); // t = 1000
    expect(c.aborted.at).toBe(1000);
    expect(d.aborted.at).toBeNull();
    advance(100); // t = 1100
    expect(d.aborted.at).toBe(1100);
    advance(TIMEOUT);
    expect(e.aborted.at).toBeNull();
    expect(e.deadline.expired).toBe(false);
  });

  it('a request that finished removed its listener: a late expiry cannot abort it', () => {
    const f = request();
    f.deadline.removeListener();
    advance(TIMEOUT);
    expect(f.aborted.at).toBeNull();
    deadlines.finish(f.deadline);
  });

  it('nothing stays armed or queued once every request has finished', () => {
    const started = Array.from({ length: 3000 }, () => request());
    advance(10);
    for (const r of started) deadlines.finish(r.deadline);
    expect(deadlines.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    const g = request();
    expect(vi.getTimerCount()).toBe(1);
    advance(TIMEOUT);
    expect(g.aborted.at).toBe(TIMEOUT + 10);
  });
});
