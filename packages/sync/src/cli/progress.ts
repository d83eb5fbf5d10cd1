// The text of store-api-sync's progress bars (sync-cli.ts): percentage, total and ETA.

/** "1 h 02 min", "3 min 05 s", "42 s": how long the rest takes at the rate seen so far. */
function formatEta(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
  if (s >= 60) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${s} s`;
}

/**
 * What a bar says after its count: with a total the server announced (a snapshot's X-Total-Count),
 * the percentage, the total and an ETA from the rate since the resource's first report; without one
 * (the exports of an older server) the count alone.
 */
export function progressDetail({
  records,
  total,
  done,
  since,
}: {
  records: number;
  total: number | null;
  done: boolean;
  /** Records at the first report, and the time since it: the rate the ETA extrapolates. */
  since: { records: number; elapsedMs: number };
}): string {
  if (done) return `${records} records, done`;
  if (total === null) return `${records} records, syncing`;
  const percent = total === 0 ? 100 : Math.min(100, Math.floor((records / total) * 100));
  const gained = records - since.records;
  const eta = gained > 0 && since.elapsedMs > 0 ? `ETA ${formatEta(((since.elapsedMs / gained) * Math.max(0, total - records)) / 1000)}` : 'ETA unknown';
  return `${percent}% (${records} of ${total} records), ${eta}`;
}
