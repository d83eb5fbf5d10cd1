/**
 * The adaptive per-endpoint concurrency, as a pure function: fast successes raise the limit to the
 * cap, slow answers and overload signs lower it to the floor, other answers leave it.
 */
import { describe, expect, it } from 'vitest';
import { CLAIM_AHEAD_ROUNDS, claimAhead, nextConcurrencyLimit, type ConcurrencyPolicy } from '../../src/webhooks/endpoint-concurrency.ts';
import type { HttpAttemptResult } from '../../src/webhooks/webhook-http-client.ts';

const policy: ConcurrencyPolicy = { initial: 4, min: 1, max: 16, slowMs: 1000 };
type Answer = Pick<HttpAttemptResult, 'outcome' | 'statusCode' | 'durationMs'>;
const fast: Answer = { outcome: 'success', statusCode: 200, durationMs: 3 };
const slow: Answer = { outcome: 'success', statusCode: 200, durationMs: 1000 };
const after = (limit: number, answers: Answer[]) => answers.reduce((l, a) => nextConcurrencyLimit(policy, l, a), limit);

describe('adaptive endpoint concurrency', () => {
  it('a receiver that answers fast and succeeds is given one more slot per answer, up to the cap', () => {
    expect(after(4, [fast])).toBe(5);
    expect(after(4, Array(12).fill(fast))).toBe(16);
    expect(after(4, Array(100).fill(fast))).toBe(16);
  });

  it('a success at or over the slow threshold takes a slot away, down to the floor', () => {
    expect(after(16, [slow])).toBe(15);
    expect(after(4, Array(10).fill(slow))).toBe(1);
  });

  it('timeouts, connection errors, 429 and 5xx halve the limit; other answers leave it', () => {
    expect(after(16, [{ outcome: 'timeout', statusCode: null, durationMs: 10_000 }])).toBe(8);
    expect(after(16, [{ outcome: 'connection_error', statusCode: null, durationMs: 1 }])).toBe(8);
    expect(after(16, [{ outcome: 'http_error', statusCode: 429, durationMs: 1 }])).toBe(8);
    expect(after(16, [{ outcome: 'http_error', statusCode: 503, durationMs: 1 }])).toBe(8);
    expect(
      after(3, [
        { outcome: 'http_error', statusCode: 500, durationMs: 1 },
        { outcome: 'timeout', statusCode: null, durationMs: 1 },
      ]),
    ).toBe(1);
    expect(after(7, [{ outcome: 'http_error', statusCode: 400, durationMs: 1 }])).toBe(7);
    expect(after(7, [{ outcome: 'http_error', statusCode: 410, durationMs: 1 }])).toBe(7);
    expect(after(7, [{ outcome: 'response_too_large', statusCode: 200, durationMs: 1 }])).toBe(7);
  });

  it("never leaves the policy's bounds, whatever it starts from", () => {
    expect(after(40, [{ outcome: 'http_error', statusCode: 400, durationMs: 1 }])).toBe(16);
    expect(after(0, [{ outcome: 'http_error', statusCode: 400, durationMs: 1 }])).toBe(1);
  });

  it('claims ahead twice the limit, or CLAIM_AHEAD_ROUNDS times it after a fast success', () => {
    expect(claimAhead(4, false)).toBe(8);
    expect(claimAhead(16, true)).toBe(16 * CLAIM_AHEAD_ROUNDS);
  });
});
