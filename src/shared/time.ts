/**
 * ISO 8601 parsing for cursors and `since` filters. Values travel as text all the way to SQL so
 * microseconds survive (a JS Date keeps milliseconds only).
 */
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/** Milliseconds of a UTC calendar instant; correct for years 0–99 too (Date.UTC maps those to 19xx). */
function utcMillis(year: number, month: number, day: number, hour = 0, minute = 0, second = 0): number {
  const date = new Date(Date.UTC(2000, 0, 1, hour, minute, second));
  date.setUTCFullYear(year, month - 1, day);
  return date.getTime();
}

/**
 * The instants accepted: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z in UTC. PostgreSQL
 * refuses year 0000 outright and every instant written back must be a 4-digit-year ISO timestamp.
 */
const EARLIEST = utcMillis(1, 1, 1);
const LATEST = utcMillis(9999, 12, 31, 23, 59, 59) + 999;

/**
 * Returns the canonical text of an ISO 8601 date or timestamp, or undefined when it is not one.
 * A value without a zone is UTC. At most microsecond precision is accepted, and only instants from
 * year 0001 to 9999 (in UTC, after the offset) — the one gate every timestamp input goes through
 * (cursors, `since`, token expiries, replay bounds), so none reaches PostgreSQL out of its range.
 */
export function parseIsoTimestamp(value: string, { dateOnly = true } = {}): string | undefined {
  const m = TIMESTAMP.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  if (h === undefined && !dateOnly) return undefined;
  const year = Number(y),
    month = Number(mo),
    day = Number(d),
    hour = Number(h ?? 0),
    minute = Number(mi ?? 0),
    second = Number(s ?? 0);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) return undefined;
  const probe = new Date(utcMillis(year, month, day));
  if (probe.getUTCMonth() !== month - 1) return undefined; // 2026-02-30
  const z = zone === undefined || zone === 'Z' ? '+00:00' : zone.length === 5 ? `${zone.slice(0, 3)}:${zone.slice(3)}` : zone;
  const zh = Number(z.slice(1, 3)),
    zm = Number(z.slice(4, 6));
  if (zh > 14 || zm > 59) return undefined;
  const offsetMs = (z[0] === '-' ? -1 : 1) * (zh * 60 + zm) * 60_000;
  const instant = utcMillis(year, month, day, hour, minute, second) - offsetMs;
  if (instant < EARLIEST || instant > LATEST) return undefined;
  return `${y}-${mo}-${d}T${String(hour).padStart(2, '0')}:${String(minute).padStart(2, '0')}:${String(second).padStart(2, '0')}.${(frac ?? '').padEnd(6, '0')}${z}`;
}

/** Milliseconds since the epoch → ISO text with microseconds, UTC. */
export function isoFromMillis(ms: number): string {
  return new Date(ms).toISOString().replace('Z', '000Z');
}

/**
 * Microseconds since the epoch of a timestamp in the canonical text of parseIsoTimestamp or of
 * iso_utc() (`…Z`); undefined when it is neither. Exact where a JS Date would drop microseconds.
 */
export function epochMicros(text: string): number | undefined {
  const canonical = parseIsoTimestamp(text, { dateOnly: false });
  if (!canonical) return undefined;
  const m = /^(.{19})\.(\d{6})(.*)$/.exec(canonical)!;
  return Date.parse(`${m[1]}${m[3]}`) * 1000 + Number(m[2]);
}

/** Microseconds since the epoch → ISO text with microseconds, UTC (the form iso_utc() writes). */
export function isoFromMicros(micros: number): string {
  const ms = Math.floor(micros / 1000);
  const rest = micros - ms * 1000;
  return new Date(ms).toISOString().replace('Z', `${String(rest).padStart(3, '0')}Z`);
}
