import { describe, expect, it } from 'vitest';
import { retryAfterMs } from '../../src/admin/sessions/sign-in-throttle.ts';

describe('retryAfterMs (sign-in throttle policy)', () => {
  const window = 900_000;

  it('allows while fewer than max failures are in the window', () => {
    expect(retryAfterMs([], 5, window)).toBe(0);
    expect(retryAfterMs([1, 2, 3, 4], 5, window)).toBe(0);
    expect(retryAfterMs([1, 2, 3, 4, 900_000], 5, window)).toBe(0);
  });

  it('waits until the max-th newest failure leaves the window', () => {
    expect(retryAfterMs([1_000, 2_000, 3_000, 4_000, 5_000], 5, window)).toBe(895_000);
    expect(retryAfterMs([1_000, 2_000, 3_000, 4_000, 5_000, 6_000], 5, window)).toBe(895_000);
  });

  it('never answers 0 while blocked', () => {
    expect(retryAfterMs([899_999, 899_999], 2, window)).toBe(1);
  });
});
