/**
 * The one place that reads the environment. `loadConfig()` validates every variable against one
 * schema and returns a frozen, typed object; a bad variable stops the start with its name.
 */
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { existsSync, readFileSync } from 'node:fs';
import { parse as parseDotenv } from 'dotenv';

const Int = (def: number, min = 0, max = Number.MAX_SAFE_INTEGER, description = '') => Type.Integer({ default: def, minimum: min, maximum: max, description });
const Bool = (def: boolean, description = '') => Type.Boolean({ default: def, description });

/** The environment schema; every key is an environment variable of the same name. */
export const EnvSchema = Type.Object({
  PORT: Int(3000, 0, 65535, 'TCP port of the HTTP server'),
  HOST: Type.String({ default: '127.0.0.1', description: 'Interface the HTTP server binds to' }),
  REQUEST_TIMEOUT_MS: Int(
    30_000,
    100,
    3_600_000,
    'Longest a client may take to send a whole request, head and body; a slower one is answered 408 and disconnected',
  ),
  HEADERS_TIMEOUT_MS: Int(
    10_000,
    100,
    3_600_000,
    'Longest a client may take to send the head of a request (at most REQUEST_TIMEOUT_MS); a slower one is answered 408',
  ),
  KEEP_ALIVE_TIMEOUT_MS: Int(
    72_000,
    100,
    3_600_000,
    "How long an idle keep-alive connection stays open waiting for its next request (keep it above your load balancer's idle timeout)",
  ),
  MAX_CONNECTIONS_PER_ADDRESS: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      description:
        "Most connections one client address may hold at once; further ones are closed as soon as accepted, logged and counted (store_api_connections_refused_total). Default 256, or 0 (no cap) with TRUST_PROXY, where every client has the proxy's address: cap at the proxy. 0 = no cap",
    }),
  ),
  TRUST_PROXY: Bool(false, 'Take the client address from X-Forwarded-For (set only behind a proxy you run)'),
  DATA_DIR: Type.String({ default: './data', description: 'Embedded (PGlite) data directory, used when DATABASE_URL is unset' }),
  DATA_DIR_MIN_FREE_MB: Int(
    64,
    0,
    1_048_576,
    "Embedded database only: writes are refused (507) while the data directory's disk has less free space than this, so a full disk never wedges the process; 0 = no check",
  ),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://', description: 'PostgreSQL connection string; replaces the embedded database' })),
  DATABASE_POOL_SIZE: Int(10, 1, 200, 'Maximum PostgreSQL connections per process'),
  DATABASE_CONNECT_TIMEOUT_MS: Int(
    5000,
    100,
    600_000,
    'PostgreSQL: longest opening one connection may take; past it a request is answered 503, and a start tries again until DATABASE_START_TIMEOUT_MS',
  ),
  DATABASE_START_TIMEOUT_MS: Int(
    120_000,
    0,
    3_600_000,
    'PostgreSQL: how long a start (and `store-api migrate`) keeps trying while connections time out or the server is starting up, logging each try; a clear refusal (nothing listening, unknown host, wrong password, missing database) stops it at once. 0 = one try',
  ),
  TOKEN_CACHE_MS: Int(
    60_000,
    0,
    3_600_000,
    'Longest a valid API token is served from the process cache without a look-up (revocation still takes effect on the next request); 0 = off',
  ),
  LIST_PAGE_CACHE_MB: Int(
    16,
    0,
    4096,
    'PostgreSQL only: memory for list pages kept until the next write to the store (every write empties it, in every process); 0 = off',
  ),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://', description: 'Redis for state shared by several API processes (rate limits)' })),
  REDIS_KEY_PREFIX: Type.String({
    default: 'store-api:',
    minLength: 1,
    maxLength: 100,
    description: 'Prefix of every Redis key this deployment writes (several deployments may share one Redis)',
  }),
  METRICS_PORT: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 65535,
      description: 'Port of the /metrics, /healthz and /readyz listener of the `worker` role (the API roles serve them on PORT)',
    }),
  ),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  STORE_MAX_API_KEYS: Int(
    1000,
    1,
    1_000_000,
    'Most API keys a store may hold at once (revoked and expired ones not counted); one more is refused with 409 store_limit_reached',
  ),
  STORE_MAX_WEBHOOK_ENDPOINTS: Int(1000, 1, 1_000_000, 'Most webhook endpoints a store may have; one more is refused with 409 store_limit_reached'),
  STORE_MAX_PRODUCTS: Int(
    0,
    0,
    1_000_000_000,
    'Most products one store may hold (inactive ones included); one more is refused with 409 store_limit_reached, nothing written. 0 = no limit',
  ),
  STORE_MAX_ORDERS: Int(0, 0, 1_000_000_000, 'Most orders one store may hold; one more is refused with 409 store_limit_reached, nothing written. 0 = no limit'),
  STORE_MAX_SNAPSHOTS: Int(
    4,
    0,
    10_000,
    'Most snapshots (GET /api/v1/{resource}/snapshot) of one store streaming at once, across its keys (shared through Redis when configured); one more is refused 429 rate_limited with Retry-After. 0 = no bound',
  ),
  STORE_MAX_IMPORTS: Int(
    1,
    0,
    10_000,
    'Most stock imports (POST /admin/api/v1/inventory/import) of one store running at once (shared through Redis when configured); one more is refused 429 rate_limited with Retry-After, nothing written. 0 = no bound',
  ),
  IMPORT_JOB_ROWS: Int(
    10_000,
    0,
    10_000_000,
    'A stock CSV import (POST /admin/api/v1/inventory/import) of more rows than this is answered 202 with a job to poll instead of waiting for its end (decision 0060); 0 = every import is a job',
  ),
  IMPORT_JOB_QUEUE: Int(
    4,
    1,
    10_000,
    'Most import jobs of one store queued or running at once; one more is refused 429 rate_limited with Retry-After, nothing stored',
  ),
  IMPORT_JOB_POLL_MS: Int(
    1000,
    10,
    3_600_000,
    'How often the process that runs background work (worker, all) looks for queued import jobs besides being woken',
  ),
  IMPORT_JOB_LEASE_MS: Int(
    60_000,
    100,
    3_600_000,
    'An import job whose runner has not renewed its hold for this long is taken as stopped (its process was killed) and resumed from its last committed step; renewed every quarter of it',
  ),
  IMPORT_JOB_REST_PERCENT: Int(
    0,
    0,
    1000,
    "After each committed step of an import job, when other sessions of the database are busy (PostgreSQL), the runner rests this share of the step's time (at most 1 s) before the next step, so other stores' reads and deliveries get more of the cores; 0 = never rest, the default (see docs/decisions/0060)",
  ),
  IMPORT_JOB_ATTEMPTS: Int(3, 1, 100, 'Runs an import job gets: one stopped by a crash or a database error runs again until this many, then fails saying why'),
  PLATFORM_API_TOKEN: Type.Optional(
    Type.String({
      minLength: 32,
      maxLength: 512,
      pattern: '^\\S+$',
      description:
        "The platform credential of /platform/api/v1 (create, list, suspend, resume and delete stores), at least 32 characters; unset: that API is off. It is no store's key and reads no store's data",
    }),
  ),
  PUBLIC_URL: Type.Optional(Type.String({ pattern: '^https?://', description: 'Base URL printed and used in Link headers; default http://HOST:PORT' })),
  SEED_DEMO: Bool(true, 'Seed a small demo store when the database is empty at start (embedded default)'),
  SEED_DEMO_PRODUCTS: Int(300, 1, 1_000_000, 'Number of demo products seeded at first start'),
  RATE_LIMIT_STANDARD: Int(60, 1, 1_000_000, 'Requests per window per token on standard endpoints'),
  RATE_LIMIT_EXPORT: Int(10, 1, 1_000_000, 'Requests per window per token on export endpoints'),
  RATE_LIMIT_WINDOW_MS: Int(60_000, 100, 86_400_000, 'Rate-limit window length in milliseconds'),
  STORE_RATE_LIMIT: Int(
    0,
    0,
    1_000_000_000,
    "Requests per window (RATE_LIMIT_WINDOW_MS) across all of one store's keys, standard and export together, on top of each key's own limits; one more is refused 429 rate_limited naming the store's limit. 0: no store-wide limit",
  ),
  WEBHOOK_POLL_INTERVAL_MS: Int(3000, 10, 3_600_000, 'How often the event log is checked for new events'),
  WEBHOOK_RETRY_SCHEDULE_MS: Type.String({
    default: '60000,300000,1800000,7200000,43200000',
    pattern: '^\\d+(,\\d+)*$',
    description: 'Delays before each retry, comma-separated milliseconds',
  }),
  WEBHOOK_TIMEOUT_MS: Int(10_000, 10, 600_000, 'Timeout of one delivery attempt'),
  WEBHOOK_BREAKER_THRESHOLD: Int(10, 1, 10_000, 'Consecutive failures that pause an endpoint'),
  WEBHOOK_BREAKER_PAUSE_MS: Int(1_800_000, 10, 86_400_000, 'How long a tripped endpoint stays paused'),
  WEBHOOK_SECRET_OVERLAP_MS: Int(86_400_000, 0, 604_800_000, 'How long a rotated-out signing secret keeps signing'),
  WEBHOOK_CONCURRENCY: Int(16, 1, 1000, 'Deliveries in flight per worker process'),
  WEBHOOK_ENDPOINT_CONCURRENCY: Int(
    4,
    1,
    100,
    'Deliveries in flight per endpoint per worker process to start with; adapts between 1 and WEBHOOK_ENDPOINT_CONCURRENCY_MAX to how the endpoint answers',
  ),
  WEBHOOK_ENDPOINT_CONCURRENCY_MAX: Int(
    16,
    1,
    1000,
    'Most deliveries in flight per endpoint per worker process, reached only while the endpoint answers fast and succeeds (never below WEBHOOK_ENDPOINT_CONCURRENCY)',
  ),
  WEBHOOK_ORIGINS_KEPT: Int(
    1024,
    1,
    100_000,
    "Receivers' origins whose connection pools a worker process keeps open; beyond it the least recently used pool is closed",
  ),
  WEBHOOK_SLOW_ANSWER_MS: Int(1000, 1, 600_000, "A successful answer slower than this lowers the endpoint's concurrency by one; faster ones raise it"),
  WEBHOOK_LEASE_MS: Int(60_000, 100, 3_600_000, 'How long a claimed delivery stays locked to its worker'),
  WEBHOOK_ALLOW_PRIVATE_URLS: Bool(false, 'Allow webhook URLs on loopback and private networks'),
  WEBHOOK_CREDENTIALS_KEY: Type.Optional(
    Type.String({
      pattern: '^[A-Za-z0-9+/]{43}=(,[A-Za-z0-9+/]{43}=)*$',
      description:
        "Key that seals endpoint credentials (extra headers, OAuth client secrets, client certificates' keys) at rest: 32 random bytes as base64 (`openssl rand -base64 32`). A comma-separated list rotates: the first seals, every one opens. Unset: endpoints cannot be given credentials, nor stores single sign-on (its client secret is sealed with it)",
    }),
  ),
  EVENT_RETENTION_MS: Int(2_592_000_000, 1000, 315_360_000_000, 'How long events are kept (feed, replays); longer while a delivery still needs one'),
  WEBHOOK_DELIVERY_RETENTION_MS: Int(2_592_000_000, 1000, 315_360_000_000, 'How long succeeded deliveries and their attempts are kept after success'),
  WEBHOOK_DEAD_LETTER_RETENTION_MS: Int(
    7_776_000_000,
    1000,
    315_360_000_000,
    'How long dead letters and their attempts are kept unless retried (at least WEBHOOK_DELIVERY_RETENTION_MS)',
  ),
  AUDIT_LOG_RETENTION_MS: Int(31_536_000_000, 1000, 315_360_000_000, "How long entries of the administrators' audit log are kept"),
  IMPORT_JOB_RETENTION_MS: Int(
    2_592_000_000,
    1000,
    315_360_000_000,
    'How long a finished import job (succeeded or failed, its CSV already dropped) is kept after it ended',
  ),
  RETENTION_INTERVAL_MS: Int(600_000, 1000, 86_400_000, 'Time between pruning runs of the worker role'),
  RETENTION_BATCH_SIZE: Int(1000, 1, 100_000, 'Rows deleted per pruning statement (each in its own short transaction)'),
  READINESS_BUSY_MS: Int(
    60_000,
    0,
    3_600_000,
    "Embedded database: while /readyz's own check waits behind other work (a large import, a long statement), it still answers 200 as long as the database's thread is alive and has answered a statement within this many ms; past it, 503. 0 = a check unanswered within 2 s is 503",
  ),
  PGLITE_SHARED_BUFFERS_MB: Int(
    8,
    1,
    8192,
    "PostgreSQL's shared_buffers (MiB) inside the embedded database; it stays resident once filled (see src/db/database.ts)",
  ),
  PGLITE_WASM_OPTIMIZING: Bool(
    false,
    "Let V8 optimize the embedded database's WebAssembly (faster long statements, ~300 MiB more RSS; see src/ops/heap-tuning.ts)",
  ),
  PGLITE_WORKER_YOUNG_GENERATION_MB: Int(
    8,
    1,
    1024,
    "V8's young generation (MiB) of the embedded database's own thread, which rows pass through on their way to the HTTP thread (see docs/decisions/0030)",
  ),
  PGLITE_WORKER_BUFFER_SLACK_MB: Int(
    8,
    0,
    1024,
    "Dead buffers (MiB) the embedded database's thread, and the HTTP thread for the pages read from it, may pile up before collecting them early; 0 = when V8 decides (see docs/decisions/0043, 0046)",
  ),
  STOCK_IMPORT_STEP_ROWS: Int(
    100,
    0,
    1_000_000,
    'Embedded database: rows per committed step of an absolute CSV stock import, so reads pass between steps (0 = one transaction; see docs/decisions/0036, 0049)',
  ),
  PROGRESS_LOG_INTERVAL_MS: Int(
    5000,
    10,
    3_600_000,
    'How often long work (opening and migrating the database, seeding the demo store, a large stock import) logs how far it got',
  ),
  HEAP_GROWING_PERCENT: Int(
    10,
    0,
    1000,
    'How far (%) the JavaScript heap may grow past its live size before a full collection in server roles; 0 = V8 default (see src/ops/heap-tuning.ts)',
  ),
  SHUTDOWN_TIMEOUT_MS: Int(25_000, 100, 600_000, 'Grace period for in-flight work on SIGTERM'),
  ADMIN_SESSION_TTL_MS: Int(43_200_000, 60_000, 2_592_000_000, 'Admin dashboard session lifetime'),
  COOKIE_SECURE: Bool(false, 'Mark the dashboard session cookie Secure (set when served over HTTPS)'),
  ADMIN_SIGN_IN_MAX_FAILURES: Int(5, 1, 1000, 'Failed dashboard sign-ins per email and client address before sign-in is refused for a while'),
  ADMIN_SIGN_IN_WINDOW_MS: Int(900_000, 1000, 86_400_000, 'Window over which failed dashboard sign-ins are counted'),
  ADMIN_REAUTH_WINDOW_MS: Int(
    300_000,
    10_000,
    3_600_000,
    'How long a dashboard sign-in, password or second-factor code counts as a fresh proof for revealing a signing secret, minting a write or admin key, changing roles',
  ),
  ADMIN_PASSKEY_CHALLENGE_TTL_MS: Int(
    120_000,
    10_000,
    600_000,
    'How long the challenge of a passkey ceremony (adding one, signing in, a second-factor step) stays valid; the relying party is PUBLIC_URL (its host is the RP id, its origin the expected origin)',
  ),
  ADMIN_SETUP_LINK_TTL_MS: Int(3_600_000, 60_000, 604_800_000, 'How long the one-time first-administrator setup link printed at start stays valid'),
  ADMIN_INVITATION_TTL_MS: Int(604_800_000, 60_000, 2_592_000_000, 'How long a one-time invitation link for a new administrator stays valid'),
  ADMIN_PASSWORD_RESET_TTL_MS: Int(3_600_000, 60_000, 604_800_000, 'How long a one-time password-reset link an owner issued stays valid'),
  ADMIN_PASSWORD: Type.Optional(
    Type.String({ minLength: 1, description: 'Password for `store-api admin create` when --password is not given (never read by the server)' }),
  ),
});

export type Config = Readonly<Static<typeof EnvSchema>> & {
  /** Parsed WEBHOOK_RETRY_SCHEDULE_MS. */
  readonly webhookRetryScheduleMs: readonly number[];
  /** MAX_CONNECTIONS_PER_ADDRESS as set, else its default: 0 (no cap) with TRUST_PROXY, else DEFAULT_MAX_CONNECTIONS_PER_ADDRESS. */
  readonly maxConnectionsPerAddress: number;
};

/** Connections one client address may hold when MAX_CONNECTIONS_PER_ADDRESS is unset and TRUST_PROXY is off (256). */
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256;

/** A bad configuration; `variables` names the variables at fault. */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly variables: readonly string[] = [],
  ) {
    super(message);
  }
}

/**
 * Validates `env` (default: process.env merged over an optional `.env` file in the working
 * directory) and returns the frozen configuration. Throws ConfigError naming each bad variable.
 */
export function loadConfig(env: Record<string, string | undefined> = readEnvironment()): Config {
  const known = Object.keys(EnvSchema.properties);
  const input: Record<string, unknown> = {};
  for (const key of known) {
    const value = env[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  // Convert mutates its argument; keep `input` as given so messages quote the raw value.
  const converted = Value.Default(EnvSchema, Value.Convert(EnvSchema, { ...input })) as Record<string, unknown>;
  const errors = [...Value.Errors(EnvSchema, converted)].map((e) => ({ name: e.path.replace(/^\//, '') || '(environment)', message: e.message }));
  const problems = errors.map(({ name, message }) => `${name}=${JSON.stringify(input[name] ?? '')}: ${message}`);
  if (problems.length > 0) {
    throw new ConfigError(`Invalid configuration:\n  ${[...new Set(problems)].join('\n  ')}`, [...new Set(errors.map((e) => e.name))]);
  }
  const parsed = converted as Static<typeof EnvSchema>;
  // Dead letters are the deliveries someone still has to look at: never pruned before the others.
  // The message names the variable that was set (the dead letters' one when both were).
  if (parsed.WEBHOOK_DEAD_LETTER_RETENTION_MS < parsed.WEBHOOK_DELIVERY_RETENTION_MS) {
    const problem =
      input.WEBHOOK_DEAD_LETTER_RETENTION_MS !== undefined
        ? `WEBHOOK_DEAD_LETTER_RETENTION_MS=${JSON.stringify(input.WEBHOOK_DEAD_LETTER_RETENTION_MS)}: must be at least WEBHOOK_DELIVERY_RETENTION_MS (${parsed.WEBHOOK_DELIVERY_RETENTION_MS})`
        : `WEBHOOK_DELIVERY_RETENTION_MS=${JSON.stringify(input.WEBHOOK_DELIVERY_RETENTION_MS)}: must not exceed WEBHOOK_DEAD_LETTER_RETENTION_MS (${parsed.WEBHOOK_DEAD_LETTER_RETENTION_MS}); raise that too`;
    throw new ConfigError(`Invalid configuration:\n  ${problem}`, [
      input.WEBHOOK_DEAD_LETTER_RETENTION_MS !== undefined ? 'WEBHOOK_DEAD_LETTER_RETENTION_MS' : 'WEBHOOK_DELIVERY_RETENTION_MS',
    ]);
  }
  if (parsed.HEADERS_TIMEOUT_MS > parsed.REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      `Invalid configuration:\n  HEADERS_TIMEOUT_MS=${JSON.stringify(String(parsed.HEADERS_TIMEOUT_MS))}: must not exceed REQUEST_TIMEOUT_MS (${parsed.REQUEST_TIMEOUT_MS})`,
    );
  }
  return Object.freeze({
    ...parsed,
    webhookRetryScheduleMs: Object.freeze(parsed.WEBHOOK_RETRY_SCHEDULE_MS.split(',').map(Number)),
    // Behind a proxy every client has the proxy's address: a cap per address would cap the proxy.
    maxConnectionsPerAddress: parsed.MAX_CONNECTIONS_PER_ADDRESS ?? (parsed.TRUST_PROXY ? 0 : DEFAULT_MAX_CONNECTIONS_PER_ADDRESS),
  });
}

/** process.env over the variables of an optional `.env` file (process.env wins). */
export function readEnvironment(): Record<string, string | undefined> {
  const fromFile = existsSync('.env') ? parseDotenv(readFileSync('.env')) : {};
  return { ...fromFile, ...process.env };
}

/** Base URL clients should use, for printed messages and Link headers. */
export function publicUrl(config: Config, port = config.PORT): string {
  if (config.PUBLIC_URL) return config.PUBLIC_URL.replace(/\/$/, '');
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST;
  return `http://${host}:${port}`;
}
