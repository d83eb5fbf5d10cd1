/** Rows per statement of set-based bulk writes: big enough to stay cheap, small enough that the embedded database yields often. */
export const CHUNK_SIZE = 1000;

/**
 * Rows per statement of bulk writes that fire the stored-document triggers (stock levels, stock
 * movements, product recomputes): each row rebuilds a document, about a millisecond per row on the
 * embedded database, so 1,000-row statements held its thread 0.7–1.6 s each during a large import
 * (/healthz waited as long). 200 keeps each under ~150 ms on a loaded machine (decision 0018).
 */
export const TRIGGERED_WRITE_CHUNK = 200;

/** `items` in consecutive slices of at most `size`. */
export function chunks<T>(items: readonly T[], size = CHUNK_SIZE): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
