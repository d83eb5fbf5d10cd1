/**
 * What `npm start` prints about the dashboard: where it is, and, while no administrator exists, a
 * one-time setup link to create the first one in the browser without stopping the server
 * (sessions/setup-code.service.ts), with the CLI as the alternative.
 */
import type { AppContext } from '../../app-context.ts';
import type { App } from '../../app.ts';
import { publicUrl } from '../../config/config.ts';
import { issueSetupCode } from '../sessions/setup-code.service.ts';

/** The lines to print once `app` listens ('' before it does). Issues a setup code while no administrator exists. */
export async function adminSignInHint(ctx: AppContext, app: App): Promise<string> {
  const address = app.server.address();
  if (!address || typeof address === 'string') return '';
  const dashboard = `${publicUrl(ctx.config, address.port)}/admin`;
  const ttlMs = ctx.config.ADMIN_SETUP_LINK_TTL_MS;
  const setup = await issueSetupCode(ctx.database.db, ttlMs);
  if (!setup) return `Admin dashboard: ${dashboard}\n`;
  // The code travels in the fragment: browsers never send it to the server, so no log holds it.
  const link = `${dashboard}#/setup?code=${setup.code}`;
  const validity = ttlMs % 3_600_000 === 0 ? `${ttlMs / 3_600_000} h` : `${Math.round(ttlMs / 60_000)} min`;
  return `Admin dashboard: ${dashboard}\n` +
    `No administrator exists yet. Open this link to create the first one (works once, for ${validity}):\n\n  ${link}\n\n` +
    `(Or, with the server stopped or on PostgreSQL: npx store-api admin create --email you@example.com)\n`;
}
