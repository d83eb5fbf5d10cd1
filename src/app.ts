/**
 * The one factory of the HTTP application. It builds and never listens (main/ does that), so tests
 * inject requests into exactly what production runs.
 *
 * Layout of the URL space:
 *   /api/v1/...          read API (bearer token with read scopes)
 *   /admin/api/v1/...    admin API (admin-scoped token or dashboard session)
 *   /admin               dashboard
 */
import { PLATFORM_PREFIX, platformRoutes } from './stores/platform.routes.ts';
import { currentScope, PLATFORM_SCOPE, setScope, withScopeHolder } from './db/store-scope.ts';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import { activeTracing, currentTraceContext } from './shared/tracing.ts';
import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from './app-context.ts';
import { clientErrorHandler, errorHandlerPlugin, frameworkErrorHandler } from './api/plugins/error-handler.ts';
import { trackRequests } from './api/plugins/client-timeouts.ts';
import { exactMultipleOfPlugin, inputGuardPlugin } from './api/plugins/input-guard.ts';
import { readApiRoutes } from './api/routes/v1/index.ts';
import { adminApiRoutes } from './admin/admin-api.routes.ts';
import { observabilityPlugin } from './ops/observability.plugin.ts';
import { gracefulClosePlugin } from './ops/graceful-close.plugin.ts';
import { secretResponsesPlugin } from './ops/secret-responses.ts';
import { limitConnectionsPerAddress } from './ops/connection-limits.ts';
import { opsRoutes } from './ops/ops.routes.ts';
import { generateRequestId, REQUEST_ID_LOG_LABEL } from './ops/request-id.ts';
import { conditionalGetPlugin } from './api/plugins/conditional-get.ts';
import { compressionPlugin } from './api/plugins/compression.ts';
import { rateLimitPlugin } from './api/plugins/rate-limit.ts';
import { openApiPlugin } from './api/plugins/openapi.ts';
import { deprecationPlugin } from './api/plugins/deprecation.ts';
import { enableListPageCache } from './api/list-page-cache.ts';
import { ReadCacheListener } from './db/read-cache-signals.ts';
import { enableTokenCache } from './tokens/token-cache.ts';
import { dashboardPlugin } from './admin/dashboard/dashboard.plugin.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Configuration, database and logger of this process. */
    ctx: AppContext;
  }
}

export type App = FastifyInstance;

/** Builds the application for `ctx`. Call `app.close()` to release it (the database is the caller's). */
export async function buildApp(ctx: AppContext): Promise<App> {
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    // Only behind our own proxy may X-Forwarded-For pick the client address (sign-in throttling).
    trustProxy: ctx.config.TRUST_PROXY,
    frameworkErrors: frameworkErrorHandler,
    // Requests the HTTP parser refuses, and HTTP/1.1 requests without Host, are answered problem+json
    // by our handlers (error-handler.ts) instead of Node's and Fastify's bare defaults.
    clientErrorHandler,
    // Slow clients: a request whose head or body does not arrive in time is answered 408
    // (clientErrorHandler) and its connection closed, so slow senders cannot hold descriptors for
    // ever; idle keep-alive connections close after KEEP_ALIVE_TIMEOUT_MS. Node checks the deadlines
    // every connectionsCheckingInterval (default 30 s): a quarter of the shortest one, at most 1 s.
    http: {
      requireHostHeader: false,
      headersTimeout: ctx.config.HEADERS_TIMEOUT_MS,
      // Here as well as below: Node checks headersTimeout against requestTimeout when it creates the
      // server, before Fastify sets the latter, so a head deadline past Node's 300 s default failed.
      requestTimeout: ctx.config.REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(ctx.config.HEADERS_TIMEOUT_MS / 4))),
    },
    requestTimeout: ctx.config.REQUEST_TIMEOUT_MS,
    keepAliveTimeout: ctx.config.KEEP_ALIVE_TIMEOUT_MS,
    // generateRequestId reads X-Request-Id itself, keeping it only when it looks like an id.
    requestIdHeader: false,
    logController: new LogController({ requestIdLogLabel: REQUEST_ID_LOG_LABEL }),
    genReqId: generateRequestId,
    bodyLimit: 10 * 1024 * 1024,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
    ajv: {
      customOptions: {
        // Unknown query parameters and body properties are errors, never silently dropped.
        removeAdditional: false,
        coerceTypes: 'array',
        useDefaults: true,
        allErrors: false,
      },
      // Money is validated with multipleOf 0.01, checked exactly in decimal (input-guard.ts).
      plugins: [exactMultipleOfPlugin],
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  // Request timeouts count the client's time, not this server's (api/plugins/client-timeouts.ts).
  trackRequests(app.server);

  app.decorate('ctx', ctx);
  // With tracing on (decision 0052), before every other hook and route: each request gets a span
  // (`http.route`, the caller's traceparent continued) that its statements, writes and events join,
  // and the answer carries the request's `traceparent`.
  const tracing = activeTracing();
  if (tracing) {
    await app.register(tracing.fastifyPlugin() as FastifyPluginAsync);
    app.addHook('onRequest', (_request, reply, done) => {
      const { traceparent } = currentTraceContext();
      if (traceparent) reply.header('traceparent', traceparent);
      done();
    });
  }
  // First of the remaining hooks: every request gets its store scope holder, filled once its credential is
  // known (bearer-auth, admin-auth; db/store-scope.ts). A callback hook that calls the next one
  // inside it, so every later hook and the handler run in it.
  app.addHook('onRequest', (_request, _reply, done) => withScopeHolder(done));
  // The dashboard's sign-in, setup and link routes act for an account, whose stores they look up
  // (decision 0051, "Administrators per store"): across stores, in the platform scope; each entry
  // of a store's audit log they write names its store (the session's, the link's, else the home
  // store). The admin API's requests got their store from their session or key (admin-auth).
  app.addHook('preHandler', (request, _reply, done) => {
    if (!request.url.startsWith('/admin') || request.url.startsWith('/admin/api/') || currentScope() !== undefined) return done();
    setScope(PLATFORM_SCOPE);
    done();
  });

  // One client address cannot take every descriptor with idle or slow connections.
  limitConnectionsPerAddress(app.server, { maxPerAddress: ctx.config.maxConnectionsPerAddress, logger: ctx.logger });
  await enableReadCaches(app, ctx);
  app.decorateRequest('token', undefined);
  await app.register(errorHandlerPlugin);
  // Before ETags and compression: sees every serialised body; responses holding a secret get no-store.
  await app.register(secretResponsesPlugin);
  // Every route: no non-finite number or unstorable string past validation.
  await app.register(inputGuardPlugin);
  // Order matters: the ETag hook must see the body before compression; rate limiting hooks in after
  // bearer-auth; swagger must be registered before the routes it documents.
  await app.register(observabilityPlugin);
  await app.register(gracefulClosePlugin);
  await app.register(conditionalGetPlugin);
  await app.register(compressionPlugin);
  await app.register(rateLimitPlugin);
  await app.register(openApiPlugin);
  // Before the routes: marks deprecated operations in the OpenAPI document and answers them with Deprecation/Sunset.
  await app.register(deprecationPlugin);
  await app.register(opsRoutes);

  await app.register(readApiRoutes, { prefix: '/api/v1' });
  await app.register(dashboardPlugin); // before the admin API: its cookie parser serves both
  await app.register(adminApiRoutes, { prefix: '/admin/api/v1' });
  await app.register(platformRoutes, { prefix: PLATFORM_PREFIX });

  return app;
}

/**
 * The token cache and (PostgreSQL) the list page cache of this process, with the LISTEN connection
 * that tells them of writes made by other processes (decision 0016). On PGlite the data directory
 * belongs to this process alone, so what it writes itself is all there is to hear of.
 */
async function enableReadCaches(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const { database, config, logger } = ctx;
  let live = () => true;
  if (database.backend === 'postgres') {
    if (!database.url) return;
    const listener = new ReadCacheListener(database.url, database.db, logger);
    await listener.open();
    app.addHook('onClose', () => listener.close());
    live = () => listener.live;
    if (config.LIST_PAGE_CACHE_MB > 0) enableListPageCache(database.db, config.LIST_PAGE_CACHE_MB * 1_048_576, live);
  }
  if (config.TOKEN_CACHE_MS > 0) enableTokenCache(database.db, { maxAgeMs: config.TOKEN_CACHE_MS, live });
}
