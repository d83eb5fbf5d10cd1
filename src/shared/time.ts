/**
 * ISO 8601 parsing for cursors and `since` filters. Values travel as text all the way to SQL so
 * microseconds survive (a JS Date keeps milliseconds only).
 */
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/**
 * Returns the canonical text of an ISO 8601 date or timestamp, or undefined when it is not one.
 * A value without a zone is UTC. At most microsecond precision is accepted.
 */
export function parseIsoTimestamp(value: string, { dateOnly = true } = {}): string | undefined {
  const m = TIMESTAMP.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  if (h === undefined && !dateOnly) return undefined;
  const month = Number(mo), day = Number(d), hour = Number(h ?? 0), minute = Number(mi ?? 0), second = Number(s ?? 0);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) return undefined;
  const probe = new Date(Date.UTC(Number(y), month - 1, day));
  if (probe.getUTCMonth() !== month - 1) return undefined; // 2026-02-30
  const z = zone === undefined || zone === 'Z' ? '+00:00' : zone.length === 5 ? `${zone.slice(0, 3)}:${zone.slice(3)}` : zone;
  const zh = Number(z.slice(1, 3)), zm = Number(z.slice(4, 6));
  if (zh > 14 || zm > 59) return undefined;
  return `${y}-${mo}-${d}T${String(hour).padStart(2, '0')}:${String(minute).padStart(2, '0')}:${String(second).padStart(2, '0')}.${(frac ?? '').padEnd(6, '0')}${z}`;
}

/** Milliseconds since the epoch → ISO text with microseconds, UTC. */
export function isoFromMillis(ms: number): string {
  return new Date(ms).toISOString().replace('Z', '000Z');
}
