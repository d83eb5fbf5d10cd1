/**
 * How far V8 lets the old generation grow past what survived the last full collection before it
 * collects again (HEAP_GROWING_PERCENT). V8 picks a factor between 1.1 and 4 from its own speed
 * estimates; under the list load (8 connections, 200-product pages) a `serve` process let promoted
 * garbage (page strings still in flight at two scavenges) pile up: old space grew to ~140 MB
 * around a live set of ~40 MB and the process peaked at 250–270 MB RSS. At 10 % the old space
 * stays near 45 MB and the peak near 175 MB, for about the same CPU per request (within this
 * machine's noise; docs/benchmarks.md). Unlike --max-old-space-size it is no ceiling: a live set
 * that really grows (many large requests at once) still gets the memory, it never runs out early.
 *
 * Set at run time (V8 reads the flag whenever it sizes the heap), so the documented command
 * `node bin/store-api.js <role>` needs no Node flags. 0 keeps V8's own heuristics.
 */
import { setFlagsFromString } from 'node:v8';

export function applyHeapGrowing(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
}

/**
 * Compile WebAssembly with V8's baseline compiler (Liftoff) only: PGlite's PostgreSQL is a 9 MB
 * module, and V8's optimizing tier (TurboFan), which by default recompiles the functions that get
 * hot, peaked at 880–945 MiB RSS while it worked through them at start and left the process some
 * 300 MiB heavier for good; with baseline code only, the embedded `all` started at ~390 MiB instead
 * and the list load ran as fast (docs/decisions/0018). Long statements (a large import) run slower.
 *
 * Must run before the first WebAssembly module is compiled (PGlite's, at the first open), and sets
 * the implications the command-line flag would (set at run time, `--liftoff-only` alone still tiers
 * up). Process-wide: undici's HTTP parser is WebAssembly too, and runs on baseline code as well.
 * PGLITE_WASM_OPTIMIZING=true keeps V8's default.
 */
export function useBaselineWasmCompiler(): void {
  setFlagsFromString('--liftoff-only');
  setFlagsFromString('--no-wasm-tier-up');
  setFlagsFromString('--no-wasm-dynamic-tiering');
}
