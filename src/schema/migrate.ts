/**
 * Numbered, forward-only migrations. The list is static (no directory scanning) so it works the
 * same from source, from tests and from any working directory. Add a file to migrations/ and a line
 * here; never edit a migration that has shipped (a migration's name is its row in
 * kysely_migration: renaming one runs it again).
 * Composition, above the features (decision 0041): a migration may call a resource's derived DDL;
 * db/ never imports this file, and whoever opens a data directory from a template passes it
 * `migrationNames()`.
 */
import type { Kysely } from 'kysely';
import { Migrator, type Migration, type MigrationResultSet } from 'kysely/migration';
import * as core from './migrations/0001-core.ts';
import * as webhooks from './migrations/0002-webhooks.ts';
import * as adminUsers from './migrations/0003-admin-users.ts';
import * as eventFeedRetention from './migrations/0004-event-feed-retention.ts';
import * as adminSetupCodes from './migrations/0005-admin-setup-codes.ts';
import * as lastModifiedForward from './migrations/0006-last-modified-forward.ts';
import * as equalStampsAndDeliveryTiers from './migrations/0007-equal-stamps-and-delivery-tiers.ts';
import * as storedDocuments from './migrations/0009-stored-documents.ts';
import * as idempotencyKeys from './migrations/0010-idempotency-keys.ts';
import * as adminAccountsAudit from './migrations/0012-admin-accounts-audit.ts';
import * as webhookTestDeliveries from './migrations/0013-webhook-test-deliveries.ts';
import * as deliveryQueueHotClaims from './migrations/0015-delivery-queue-hot-claims.ts';
import * as readCacheNotify from './migrations/0016-read-cache-notify.ts';
import * as keyMakers from './migrations/0017-key-makers.ts';
import * as idempotencyAnswersInTheWrite from './migrations/0018-idempotency-answers-in-the-write.ts';
import * as secondFactor from './migrations/0019-second-factor.ts';
import * as endpointRecoveredAt from './migrations/0022-endpoint-recovered-at.ts';
import * as sealedIdempotentAnswers from './migrations/0029-sealed-idempotent-answers.ts';
import * as cheaperDeliveryWrites from './migrations/0030-cheaper-delivery-writes.ts';
import * as storesAsTenants from './migrations/0031-stores-as-tenants.ts';
import * as platformAuditLog from './migrations/0032-platform-audit-log.ts';
import * as adminMemberships from './migrations/0033-admin-memberships.ts';
import * as storePollerPositions from './migrations/0034-store-poller-positions.ts';
import * as perStoreCacheSignals from './migrations/0035-per-store-cache-signals.ts';
import * as rolledSecretMaker from './migrations/0036-rolled-secret-maker.ts';
import * as secondFactorReachesKeys from './migrations/0037-second-factor-reaches-keys.ts';
import * as eventTraceContext from './migrations/0038-event-trace-context.ts';
import * as recordVersions from './migrations/0039-record-versions.ts';
import * as endpointCredentials from './migrations/0040-endpoint-credentials.ts';
import * as fifoEndpoints from './migrations/0041-fifo-endpoints.ts';
import * as importJobs from './migrations/0042-import-jobs.ts';
import * as sessionActivity from './migrations/0043-session-activity.ts';
import * as storeWritesHoldTheirStore from './migrations/0044-store-writes-hold-their-store.ts';
import * as singleSignOn from './migrations/0045-single-sign-on.ts';
import * as passkeys from './migrations/0046-passkeys.ts';
import * as claimsFollowDueWork from './migrations/0048-claims-follow-due-work.ts';
import * as attemptHeaders from './migrations/0049-attempt-headers.ts';
import * as cheaperDocumentPrevious from './migrations/0050-cheaper-document-previous.ts';
import * as statisticsKeptByBulkWrites from './migrations/0051-statistics-kept-by-bulk-writes.ts';

const migrations: Record<string, Migration> = {
  '0001-core': core,
  '0002-webhooks': webhooks,
  '0003-admin-users': adminUsers,
  '0004-event-feed-retention': eventFeedRetention,
  '0005-admin-setup-codes': adminSetupCodes,
  '0006-last-modified-forward': lastModifiedForward,
  '0007-equal-stamps-and-delivery-tiers': equalStampsAndDeliveryTiers,
  '0009-stored-documents': storedDocuments,
  '0010-idempotency-keys': idempotencyKeys,
  '0012-admin-accounts-audit': adminAccountsAudit,
  '0013-webhook-test-deliveries': webhookTestDeliveries,
  '0015-delivery-queue-hot-claims': deliveryQueueHotClaims,
  '0016-read-cache-notify': readCacheNotify,
  '0017-key-makers': keyMakers,
  '0018-idempotency-answers-in-the-write': idempotencyAnswersInTheWrite,
  '0019-second-factor': secondFactor,
  '0022-endpoint-recovered-at': endpointRecoveredAt,
  '0029-sealed-idempotent-answers': sealedIdempotentAnswers,
  '0030-cheaper-delivery-writes': cheaperDeliveryWrites,
  '0031-stores-as-tenants': storesAsTenants,
  '0032-platform-audit-log': platformAuditLog,
  '0033-admin-memberships': adminMemberships,
  '0034-store-poller-positions': storePollerPositions,
  '0035-per-store-cache-signals': perStoreCacheSignals,
  '0036-rolled-secret-maker': rolledSecretMaker,
  '0037-second-factor-reaches-keys': secondFactorReachesKeys,
  '0038-event-trace-context': eventTraceContext,
  '0039-record-versions': recordVersions,
  '0040-endpoint-credentials': endpointCredentials,
  '0041-fifo-endpoints': fifoEndpoints,
  '0042-import-jobs': importJobs,
  '0043-session-activity': sessionActivity,
  '0044-store-writes-hold-their-store': storeWritesHoldTheirStore,
  '0045-single-sign-on': singleSignOn,
  '0046-passkeys': passkeys,
  '0048-claims-follow-due-work': claimsFollowDueWork,
  '0049-attempt-headers': attemptHeaders,
  '0050-cheaper-document-previous': cheaperDocumentPrevious,
  '0051-statistics-kept-by-bulk-writes': statisticsKeptByBulkWrites,
};

/** Names of every migration this code has, in order. */
export function migrationNames(): string[] {
  return Object.keys(migrations);
}

function migrator<DB>(db: Kysely<DB>): Migrator {
  return new Migrator({ db, provider: { getMigrations: async () => migrations } });
}

export class MigrationError extends Error {
  /**
   * `retryable`: nothing ran because the database did not answer in time or is starting up, so a
   * start may try again (main/runtime.ts); a clear refusal (wrong password, missing database, …) is final.
   */
  constructor(
    message: string,
    readonly retryable = false,
  ) {
    super(message);
  }
}

/** SQLSTATEs and socket errors that mean the database could not be reached or entered at all. */
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'nothing accepts connections at that host and port: is PostgreSQL running there?',
  ENOTFOUND:
    'the host name does not resolve. If the password holds URL characters (@ : / ? # % and the like), percent-encode them in the URL (in JavaScript: encodeURIComponent), or the host is read from inside the password',
  EAI_AGAIN: 'the host name could not be resolved now (DNS)',
  ETIMEDOUT: 'the connection timed out: a firewall, a wrong host, or a server too busy to answer',
  '3D000': 'the database named in the URL does not exist: create it (createdb <name>) or fix the name',
  '28P01': 'the password was refused for that user',
  '28000': 'the server refuses this user or client address (pg_hba.conf)',
  '57P03': 'the server is starting up or shutting down: try again shortly',
};

/**
 * Applies every pending migration; throws MigrationError (with the failing name) on failure. When
 * no migration ran because the database could not be reached, the message says so, names
 * DATABASE_URL and what to check (it said "Migration (unknown) failed").
 */
export async function migrateToLatest<DB>(db: Kysely<DB>): Promise<MigrationResultSet> {
  const result = await migrator(db).migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error');
    const cause = result.error instanceof Error ? result.error.message : String(result.error);
    if (!failed) {
      const code = (result.error as { code?: unknown } | null)?.code;
      const timedOut = /timeout|timed out/i.test(cause) || code === 'ETIMEDOUT';
      const hint = typeof code === 'string' && UNREACHABLE[code] ? UNREACHABLE[code] : timedOut ? UNREACHABLE.ETIMEDOUT : undefined;
      throw new MigrationError(
        `Cannot open the database (DATABASE_URL, or DATA_DIR for the embedded one): ${cause}${hint ? ` — ${hint}` : ''}. Nothing was changed.`,
        timedOut || code === '57P03',
      );
    }
    throw new MigrationError(`Migration ${failed.migrationName} failed: ${cause}`);
  }
  return result;
}

/**
 * Applies the migrations up to `name` (included) and none after it: a database as the release that
 * shipped `name` left it (the in-place upgrade test starts from one).
 */
export async function migrateUpTo<DB>(db: Kysely<DB>, name: string): Promise<void> {
  const result = await migrator(db).migrateTo(name);
  if (result.error) throw new MigrationError(`Migration to ${name} failed: ${result.error instanceof Error ? result.error.message : String(result.error)}`);
}

/** Names of migrations not yet applied (empty when the schema is current). */
export async function pendingMigrations<DB>(db: Kysely<DB>): Promise<string[]> {
  const all = await migrator(db).getMigrations();
  return all.filter((m) => m.executedAt === undefined).map((m) => m.name);
}
