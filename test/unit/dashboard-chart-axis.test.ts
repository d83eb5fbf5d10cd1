/**
 * The dashboard's delivery chart labels its axis 0, half and top: each must be a whole number for
 * any count (the axis once read "0,000"-like fractions such as 2.5 or 12.5).
 */
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain browser module of the dashboard, without type declarations.
import { niceMax } from '../../src/admin/dashboard/public/assets/lib/chart.js';

describe('delivery chart axis', () => {
  it('has a whole-number top and middle at or above every count from 0 to 100,000', () => {
    for (let total = 0; total <= 100_000; total += total < 1000 ? 1 : 37) {
      const top = niceMax(total) as number;
      expect(top).toBeGreaterThanOrEqual(total);
      expect(Number.isInteger(top) && Number.isInteger(top / 2), `${total} → ${top}`).toBe(true);
    }
  });
});
