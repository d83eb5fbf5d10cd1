/** Durations on the command line: "500ms", "30s", "15m", "1h" or plain milliseconds. */
import { SyncError } from '../sync-errors.ts';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, min: 60_000, h: 3_600_000 };

/** Milliseconds of `value`; throws naming `flag` when it is not a positive duration. */
export function parseDuration(value: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?$/.exec(value.trim());
  const ms = match ? Number(match[1]) * UNITS[match[2] ?? 'ms']! : NaN;
  if (!(ms > 0)) throw new SyncError(`${flag} "${value}": expected a duration such as 30s, 15m or 1h`);
  return Math.round(ms);
}
