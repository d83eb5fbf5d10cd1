/**
 * The many-stores targets in docs/benchmarks.md: `npm run bench -- --stores` writes its report to
 * docs/benchmarks-stores.md and copies that report's date and "Targets" table into a marked block
 * of docs/benchmarks.md; `npm run bench` (the one-store run, which regenerates benchmarks.md) carries
 * the block over as it finds it. One page then shows every target, the many stores' included.
 */
const START = '<!-- many stores: copied from benchmarks-stores.md by `npm run bench -- --stores`, carried over by `npm run bench` -->';
const END = '<!-- end of many stores -->';
/** The line of benchmarks.md the block follows. */
const AFTER = 'into [benchmarks-stores.md](benchmarks-stores.md).';

/** The block for a many-stores report (its date and its Targets table), or undefined if it has no Targets section. */
export function storesSummary(storesReport: string): string | undefined {
  const at = storesReport.indexOf('\n## Targets\n');
  if (at < 0) return undefined;
  const rows: string[] = [];
  for (const line of storesReport.slice(at + '\n## Targets\n'.length).split('\n')) {
    if (line.startsWith('|')) rows.push(line.trimEnd());
    else if (rows.length > 0) break;
  }
  if (rows.length < 3) return undefined;
  const generated = /on (\d{4}-\d\d-\d\d \d\d:\d\d) UTC/.exec(storesReport)?.[1];
  return [
    START,
    '',
    `The many stores' targets, as the last \`npm run bench -- --stores\` measured them${generated === undefined ? '' : ` (${generated} UTC)`}:`,
    '',
    ...rows,
    '',
    END,
  ].join('\n');
}

/** The block as `benchmarks` holds it, or undefined. */
export function storesSummaryIn(benchmarks: string): string | undefined {
  const start = benchmarks.indexOf(START);
  const end = benchmarks.indexOf(END, start);
  return start < 0 || end < 0 ? undefined : benchmarks.slice(start, end + END.length);
}

/** `benchmarks` with `block` in place of its block, or after the line naming benchmarks-stores.md (unchanged without that line). */
export function withStoresSummary(benchmarks: string, block: string): string {
  const old = storesSummaryIn(benchmarks);
  if (old !== undefined) return benchmarks.replace(old, block);
  const at = benchmarks.indexOf(AFTER);
  if (at < 0) return benchmarks;
  const lineEnd = at + AFTER.length;
  return `${benchmarks.slice(0, lineEnd)}\n\n${block}${benchmarks.slice(lineEnd)}`;
}
