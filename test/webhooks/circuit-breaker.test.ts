import { describe, expect, it } from 'vitest';
import {
  afterFailure,
  afterSuccess,
  breakerPhase,
  countsTowardBreaker,
  refusalShowsUp,
  probeClaimed,
  recovers,
  type BreakerState,
} from '../../src/webhooks/circuit-breaker.ts';

const policy = { threshold: 10, pauseMs: 30 * 60_000 };

/** A fake clock: tests move it by hand. */
function fakeClock(start = Date.UTC(2026, 0, 1)) {
  let now = start;
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('circuit breaker (pure, fake clock)', () => {
  it('stays closed through 9 failures and opens on the 10th for the pause', () => {
    const clock = fakeClock();
    let state: BreakerState = afterSuccess();
    for (let i = 1; i <= 9; i++) {
      state = afterFailure(policy, state, clock.now());
      expect(breakerPhase(policy, state, clock.now())).toBe('closed');
    }
    state = afterFailure(policy, state, clock.now());
    expect(state).toEqual({ consecutiveFailures: 10, pausedUntil: clock.now() + policy.pauseMs });
    expect(breakerPhase(policy, state, clock.now())).toBe('open');
    clock.advance(policy.pauseMs - 1);
    expect(breakerPhase(policy, state, clock.now())).toBe('open');
    clock.advance(1);
    expect(breakerPhase(policy, state, clock.now())).toBe('half_open');
  });

  it('half-open: claiming the probe re-arms the pause; a failed probe pauses again, a success resets', () => {
    const clock = fakeClock();
    let state: BreakerState = { consecutiveFailures: 10, pausedUntil: clock.now() };
    expect(breakerPhase(policy, state, clock.now())).toBe('half_open');
    state = probeClaimed(policy, state, clock.now());
    expect(breakerPhase(policy, state, clock.now())).toBe('open');
    clock.advance(2_000);
    state = afterFailure(policy, state, clock.now());
    expect(state).toEqual({ consecutiveFailures: 11, pausedUntil: clock.now() + policy.pauseMs });
    clock.advance(policy.pauseMs);
    expect(breakerPhase(policy, state, clock.now())).toBe('half_open');
    state = probeClaimed(policy, state, clock.now());
    state = afterSuccess();
    expect(state).toEqual({ consecutiveFailures: 0, pausedUntil: null });
    expect(breakerPhase(policy, state, clock.now())).toBe('closed');
  });

  it('a success in between resets the streak: failures must be consecutive', () => {
    const clock = fakeClock();
    let state: BreakerState = afterSuccess();
    for (let i = 0; i < 9; i++) state = afterFailure(policy, state, clock.now());
    state = afterSuccess();
    for (let i = 0; i < 9; i++) state = afterFailure(policy, state, clock.now());
    expect(breakerPhase(policy, state, clock.now())).toBe('closed');
  });

  it('a success that closes an open or half-open breaker is a recovery; one that keeps a closed breaker closed is not', () => {
    expect(recovers(policy, { consecutiveFailures: 10, pausedUntil: 0 })).toBe(true);
    expect(recovers(policy, { consecutiveFailures: 11, pausedUntil: null })).toBe(true);
    expect(recovers(policy, { consecutiveFailures: 9, pausedUntil: null })).toBe(false);
  });

  it('after a recovery, only a refused first attempt of an event written before it is left out of the streak (decision 0029)', () => {
    const recoveredAt = Date.UTC(2026, 0, 1, 12);
    const backlog = { attemptNumber: 1, eventCreatedAt: recoveredAt - 1, outcome: 'http_error', statusCode: 422 as number | null };
    expect(countsTowardBreaker(backlog, recoveredAt)).toBe(false);
    expect(countsTowardBreaker({ ...backlog, statusCode: 500 }, recoveredAt)).toBe(false);
    // Never recovered: every failure counts (the spec's 10 consecutive failures).
    expect(countsTowardBreaker(backlog, null)).toBe(true);
    // A retry, or an event written after the recovery, counts.
    expect(countsTowardBreaker({ ...backlog, attemptNumber: 2 }, recoveredAt)).toBe(true);
    expect(countsTowardBreaker({ ...backlog, eventCreatedAt: recoveredAt }, recoveredAt)).toBe(true);
    // No answer, or an answer that says the receiver is unavailable, counts: the endpoint may be down again.
    for (const statusCode of [null, 408, 429, 502, 503, 504]) expect(countsTowardBreaker({ ...backlog, statusCode }, recoveredAt)).toBe(true);
    // A broker refusing the message is a refusal; a broker not reached or not confirming is no answer.
    expect(countsTowardBreaker({ ...backlog, outcome: 'broker_rejected', statusCode: null }, recoveredAt)).toBe(false);
    for (const outcome of ['connection_error', 'timeout']) expect(countsTowardBreaker({ ...backlog, outcome, statusCode: null }, recoveredAt)).toBe(true);
  });

  it('a probe refused by a 4xx (not 408 or 429) shows the receiver is up; a 5xx or no answer does not; a closed breaker is not asked', () => {
    const policy = { threshold: 10, pauseMs: 60_000 };
    const open = { consecutiveFailures: 10, pausedUntil: Date.now() + 60_000 };
    const http = (statusCode: number | null) => ({ outcome: 'http_error', statusCode });
    for (const status of [400, 404, 409, 410, 413, 422]) expect(refusalShowsUp(policy, open, http(status))).toBe(true);
    for (const status of [null, 408, 429, 500, 502, 503, 504]) expect(refusalShowsUp(policy, open, http(status))).toBe(false);
    expect(refusalShowsUp(policy, { consecutiveFailures: 9, pausedUntil: null }, http(422))).toBe(false);
    // Brokers: a refusal of the message shows the broker is up; a connection failure or a missing confirm does not.
    expect(refusalShowsUp(policy, open, { outcome: 'broker_rejected', statusCode: null })).toBe(true);
    for (const outcome of ['connection_error', 'timeout']) expect(refusalShowsUp(policy, open, { outcome, statusCode: null })).toBe(false);
  });
});
