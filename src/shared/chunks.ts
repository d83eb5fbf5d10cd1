/** Rows per statement of set-based bulk writes: big enough to stay cheap, small enough that the embedded database yields often. */
export const CHUNK_SIZE = 1000;

/** `items` in consecutive slices of at most `size`. */
export function chunks<T>(items: readonly T[], size = CHUNK_SIZE): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
