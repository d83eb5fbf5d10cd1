/**
 * First start of the embedded default: when the store is empty, seed a small demo store and create
 * a demo token with all read scopes, so `npm start` shows something real at once.
 */
import { SingleBar, Presets } from 'cli-progress';
import type { AppContext } from '../app-context.ts';
import type { Announce } from '../ops/announce.ts';
import { createToken } from '../tokens/token.service.ts';
import { progressLog } from '../shared/progress-log.ts';
import { generateDemoStore, storeIsEmpty, type DemoSummary } from './demo-store.ts';

/** A progress bar on stderr for long generator runs (no-op when not a terminal). */
export function progressBar(enabled: boolean) {
  if (!enabled) return { update: () => {}, stop: () => {} };
  const bar = new SingleBar({ format: ' {phase} [{bar}] {percentage}% | {value}/{total}', hideCursor: true, stream: process.stderr }, Presets.shades_classic);
  let started = false;
  return {
    update(done: number, total: number, phase: string) {
      if (!started) {
        bar.start(total, 0, { phase });
        started = true;
      }
      bar.update(done, { phase: phase.padEnd(9) });
    },
    stop: () => started && bar.stop(),
  };
}

export async function seedDemoStoreIfEmpty(
  ctx: AppContext,
  { products, progress, announce = () => {} }: { products: number; progress: boolean; announce?: Announce },
): Promise<(DemoSummary & { token: string }) | undefined> {
  const db = ctx.database.db;
  // Copied from the build's demo template just now: the store is there, its token is not yet.
  const fromTemplate = ctx.database.templateDemo;
  if (fromTemplate) {
    const { token } = await createToken(db, { name: 'demo (created at first start)' });
    return { ...fromTemplate, token };
  }
  // A deployment of several stores is a platform's: its stores are provisioned, never seeded, and
  // no store is in scope to seed (decision 0051).
  if (ctx.database.scopes.default.kind === 'none') return undefined;
  if (!(await storeIsEmpty(db))) return undefined;
  announce({ text: `Empty store: seeding a demo store with ${products} products…\n`, msg: 'empty store: seeding a demo store', fields: { products } });
  // A bar on a terminal, a log line every few seconds anywhere else (shared/progress-log.ts).
  const bar = progress ? progressBar(true) : progressLog(ctx.logger, 'seeding the demo store', { intervalMs: ctx.config.PROGRESS_LOG_INTERVAL_MS });
  const summary = await generateDemoStore(db, { products, onProgress: (d, t, phase) => bar.update(d, t, phase) });
  bar.stop();
  const { token } = await createToken(db, { name: 'demo (created at first start)' });
  return { ...summary, token };
}
