/**
 * The admin dashboard at /admin: public/index.html and the CSS and JavaScript modules of
 * public/assets/ (no build step; the browser loads the modules as they are), the sign-in routes at /admin/session,
 * the first-administrator setup routes at /admin/setup, and
 * @fastify/cookie for the whole app so the admin API can read the session cookie too.
 *
 * Register it before the admin API: fastify-plugin lifts the cookie parser to the root, and routes
 * registered afterwards inherit its hook.
 *
 * The client routes by URL fragment (/admin#/webhooks), so the server serves one page and its
 * assets and nothing under /admin can shadow an admin API route.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import fastifyCookie from '@fastify/cookie';
import fastifyStatic from '@fastify/static';
import { fileURLToPath } from 'node:url';
import { sessionAdminRoutes } from '../routes/session.admin-routes.ts';
import { ssoSignInRoutes } from '../routes/sso-sign-in.admin-routes.ts';
import { passkeySessionRoutes } from '../routes/passkey-session.admin-routes.ts';
import { registerAdminWriteTransactions } from '../admin-write-transaction.ts';
import { setupAdminRoutes } from '../routes/setup.admin-routes.ts';
import { linkAdminRoutes } from '../routes/links.admin-routes.ts';

const PUBLIC_DIR = fileURLToPath(new URL('./public/', import.meta.url));
const ASSETS_DIR = fileURLToPath(new URL('./public/assets/', import.meta.url));

/**
 * Everything the page loads comes from this origin; no inline script or style, no framing.
 * connect-src 'self' is what the page's fetch calls need.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

async function dashboardPages(app: FastifyInstance): Promise<void> {
  app.addHook('onSend', async (_request, reply) => {
    reply.header('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('X-Frame-Options', 'DENY');
    reply.header('Referrer-Policy', 'same-origin');
  });

  await app.register(fastifyStatic, {
    root: ASSETS_DIR,
    prefix: '/admin/assets/',
    // One route per file found at start: unknown paths fall through to the JSON 404.
    wildcard: false,
    index: false,
    // Files change only with a deploy; revalidate with the ETag rather than trust a stale copy.
    cacheControl: true,
    maxAge: 0,
  });

  app.get('/admin', { schema: { hide: true } }, async (_request, reply) => {
    reply.header('Cache-Control', 'no-cache');
    return reply.sendFile('index.html', PUBLIC_DIR);
  });
}

export const dashboardPlugin = fp(
  async function dashboard(app: FastifyInstance) {
    await app.register(fastifyCookie);
    await app.register(dashboardPages);
    // Sign-in, setup and links: each write commits with the audit entry its route records (decision 0027).
    await app.register(
      async (writes) => {
        registerAdminWriteTransactions(writes);
        await writes.register(sessionAdminRoutes);
        await writes.register(passkeySessionRoutes);
        await writes.register(setupAdminRoutes);
        await writes.register(linkAdminRoutes);
        await writes.register(ssoSignInRoutes);
      },
      { prefix: '/admin' },
    );
  },
  { name: 'admin-dashboard' },
);
