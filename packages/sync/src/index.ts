/** Programmatic use of the sync tool (the CLI is a thin layer over these). */
export { openMirror, type MirrorDatabase, type MirrorOptions } from './mirror/mirror-database.ts';
export { initialSync } from './initial-sync.ts';
export { reconcile, type ReconcileReport } from './reconcile.ts';
export { verifyMirror, mirrorMatches, canonicalJson, type ResourceComparison } from './verify.ts';
export { syncStatus } from './sync-status.ts';
export { handleWebhook, startReceiver } from './webhook-receiver.ts';
export { webhookVerifier } from './webhook-verifier.ts';
export { clientStoreReader } from './client-store-reader.ts';
export { SYNC_RESOURCES, resourcesNamed } from './sync-resources.ts';
export { SyncError, describeError } from './sync-errors.ts';
export { unreadableResources, isMissingScope, type UnreadableResourcesOptions } from './unreadable-resources.ts';
export { runDaemon, readDaemonState, isFatal, daemonBackoff, type DaemonOptions, type DaemonState } from './daemon.ts';
export { webhookGaps, type WebhookGaps, type MissedEvent } from './webhook-gaps.ts';
