/**
 * Frees a thread's dead ArrayBuffers early (decision 0043; loaded by the embedded database's worker
 * too, so erasable syntax only). Their bytes live outside V8's heap: the few small objects that
 * hold them fill the young generation slowly, so V8 collects them only once tens of MiB of them
 * have piled up, and a malloc arena as large keeps their pages. In the database's thread they are
 * PGlite's copies of each statement's output; on the HTTP thread the bodies of the pages sent
 * (decision 0046). A young-generation collection (a fraction of a millisecond: the live set is
 * small) frees them; it runs when the thread's ArrayBuffers have grown by `slackMb` since the last
 * one. Undefined with 0.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export function bufferCollector(slackMb: number): { check: () => void; collections: () => number } | undefined {
  if (slackMb <= 0) return undefined;
  // The only way to call V8's collector from JavaScript: the flag exposes gc() to contexts made after it.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (options: { type: 'minor' }) => void;
  const slack = slackMb * 1048576;
  // V8's external memory (ArrayBuffers' bytes, WebAssembly memory aside) read from the isolate:
  // process.memoryUsage() also reads the process's RSS from /proc, 4 % of this thread's time when
  // it was called after every statement.
  const external = () => getHeapStatistics().external_memory;
  let floor = external();
  let collections = 0;
  return {
    check: () => {
      const now = external();
      // A collection V8 made on its own lowers the floor: the slack counts from what is left after it.
      if (now < floor) floor = now;
      if (now - floor < slack) return;
      gc({ type: 'minor' });
      collections++;
      floor = external();
    },
    collections: () => collections,
  };
}
