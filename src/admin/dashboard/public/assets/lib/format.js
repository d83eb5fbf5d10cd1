/** Display formats: dates (relative with the exact time on hover), numbers, durations. */
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const dateTimeSeconds = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const timeOnly = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const integer = new Intl.NumberFormat();

export function formatNumber(n) {
  return integer.format(Number(n ?? 0));
}

export function formatDateTime(iso, { seconds = false } = {}) {
  if (!iso) return '—';
  return (seconds ? dateTimeSeconds : dateTime).format(new Date(iso));
}

export function formatTime(iso) {
  return iso ? timeOnly.format(new Date(iso)) : '—';
}

/** "3 minutes ago", "in 2 hours", "yesterday". */
export function formatRelative(iso, now = Date.now()) {
  if (!iso) return '—';
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  const abs = Math.abs(seconds);
  if (abs < 45) return seconds <= 0 ? 'just now' : 'in a few seconds';
  const units = [
    ['year', 31_536_000],
    ['month', 2_592_000],
    ['week', 604_800],
    ['day', 86_400],
    ['hour', 3_600],
    ['minute', 60],
  ];
  for (const [unit, size] of units) {
    if (abs >= size * 0.9 || unit === 'minute') return relative.format(Math.round(seconds / size), unit);
  }
  return '';
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** Pretty JSON for payloads. */
export function formatJson(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}
