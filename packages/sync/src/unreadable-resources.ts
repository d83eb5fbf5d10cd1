/**
 * Resources the token may not read. The service answers 403 `insufficient_scope` (RFC 6750) on the
 * endpoints of a resource whose read scope the token lacks: a token made for part of a store, or
 * made before the service declared a resource (an upgrade adds one, every existing token lacks its
 * scope). One such resource must not stop the mirror of the others, so `run`, `init` and
 * `reconcile` go through `unreadableResources(…).each`: a resource refused for a missing scope is
 * skipped and said once per process, naming the resource and the scope; the others are synced; the
 * skip is noted in the mirror for `status` and forgotten once the resource is read again (its scope
 * granted, the next run or reconcile cycle mirrors it). A token that may read none of the resources
 * asked for is an error, as it always was.
 */
import type { MirrorDatabase } from './mirror/mirror-database.ts';
import { clearSkipped, markSkipped } from './mirror/mirror.repository.ts';
import { SyncError } from './sync-errors.ts';
import type { SyncResource } from './sync-resources.ts';

/** Whether `error` is the service's refusal of a token lacking the scope of what it asked: 403 `forbidden` on a resource's endpoint. */
export function isMissingScope(error: unknown): boolean {
  const e = error as { status?: unknown; code?: unknown } | undefined;
  return e?.status === 403 && e.code === 'forbidden';
}

/** The one line said when `resource` is skipped. */
export function skippedLine(resource: SyncResource): string {
  return `${resource.name}: skipped, the token lacks the scope ${resource.scope} (the service answers 403); the resources it may read are mirrored without it. Give the token ${resource.scope} to mirror ${resource.name} (the next run or reconcile picks it up), or leave it out with --resources.`;
}

export interface UnreadableResourcesOptions {
  /** Says a skip (once per resource for this object's life). */
  warn: (line: string) => void;
  /** Where skips are noted for `status` (and cleared once read again); none: nothing is noted. */
  mirror?: MirrorDatabase;
  /** Called once per resource skipped in a pass (e.g. its progress bar). */
  onSkip?: (resource: SyncResource) => void;
}

/** Runs steps per resource, skipping the resources the token may not read (see the file comment). */
export function unreadableResources({ warn, mirror, onSkip }: UnreadableResourcesOptions) {
  const warned = new Set<string>();
  return {
    /**
     * Runs `step` for each of `resources` in order; one refused for a missing scope is skipped, any
     * other failure ends the pass as it would have. Returns the readable resources' results; throws
     * a SyncError naming every resource and scope when none of them was readable.
     */
    async each<T>(resources: readonly SyncResource[], step: (resource: SyncResource) => Promise<T>): Promise<T[]> {
      const results: T[] = [];
      const skipped: SyncResource[] = [];
      for (const resource of resources) {
        let result: T;
        try {
          result = await step(resource);
        } catch (error) {
          if (!isMissingScope(error)) throw error;
          skipped.push(resource);
          if (mirror) await markSkipped(mirror.db, resource.name, resource.scope);
          onSkip?.(resource);
          if (!warned.has(resource.name)) {
            warned.add(resource.name);
            warn(skippedLine(resource));
          }
          continue;
        }
        if (mirror) await clearSkipped(mirror.db, resource.name);
        warned.delete(resource.name);
        results.push(result);
      }
      if (resources.length > 0 && skipped.length === resources.length) {
        throw new SyncError(
          `the token may read none of the resources asked for (the service answers 403): ${skipped.map((r) => `${r.name} needs ${r.scope}`).join(', ')}. Make a token with those scopes (store-api tokens create --scopes …, or the dashboard's API keys).`,
        );
      }
      return results;
    },
  };
}
