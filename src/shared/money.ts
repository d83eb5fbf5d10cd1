/**
 * Money is exact: numeric(14,2) in the database and integer minor units (cents) in arithmetic, so
 * totals never drift (19.99, never 19.990000001).
 */
export const MAX_MONEY = 999_999_999_999.99;

/** Cents of an amount with at most 2 decimals; undefined when it has more or is out of range. */
export function toCents(amount: number): number | undefined {
  if (!Number.isFinite(amount) || Math.abs(amount) > MAX_MONEY) return undefined;
  const cents = Math.round(amount * 100);
  if (Math.abs(cents / 100 - amount) > 1e-9) return undefined;
  return cents;
}

/** Decimal text of cents, e.g. 1999 → "19.99" (what numeric columns take). */
export function centsToDecimal(cents: number): string {
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  return `${sign}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

/** Largest amount a money column (numeric(14,2)) holds, in cents. */
export const MAX_MONEY_CENTS = 99_999_999_999_999;

/**
 * `cents` when a money column can hold it, else undefined: products and sums of amounts (item
 * totals, subtotals) can exceed numeric(14,2) even when every input amount fits.
 */
export function storableCents(cents: number): number | undefined {
  return Number.isSafeInteger(cents) && Math.abs(cents) <= MAX_MONEY_CENTS ? cents : undefined;
}
