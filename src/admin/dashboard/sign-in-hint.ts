/**
 * What `npm start` prints about the dashboard: where it is, and, while no administrator exists, a
 * one-time setup link to create the first one in the browser without stopping the server
 * (sessions/setup-code.service.ts), with the CLI as the alternative. Printed through the
 * announcer (ops/announce.ts): text on a terminal, JSON lines (the link flagged as a secret) elsewhere.
 */
import type { AppContext } from '../../app-context.ts';
import type { App } from '../../app.ts';
import { publicUrl } from '../../config/config.ts';
import { issueSetupCode } from '../sessions/setup-code.service.ts';
import type { Announcement } from '../../ops/announce.ts';

const CLI_ALTERNATIVE = '(Or, with the server stopped or on PostgreSQL: npx store-api admin create --email you@example.com)';

/** The announcements to make once `app` listens (none before it does). Issues a setup code while no administrator exists. */
export async function adminSignInAnnouncements(ctx: AppContext, app: App): Promise<Announcement[]> {
  const address = app.server.address();
  if (!address || typeof address === 'string') return [];
  const dashboard = `${publicUrl(ctx.config, address.port)}/admin`;
  const where: Announcement = { text: `Admin dashboard: ${dashboard}\n`, msg: `Admin dashboard: ${dashboard}`, fields: { dashboard_url: dashboard } };
  const ttlMs = ctx.config.ADMIN_SETUP_LINK_TTL_MS;
  const setup = await issueSetupCode(ctx.database.db, ttlMs);
  if (!setup) return [where];
  // The code travels in the fragment: browsers never send it to the server, so no log holds it.
  const link = `${dashboard}#/setup?code=${setup.code}`;
  const validity = ttlMs % 3_600_000 === 0 ? `${ttlMs / 3_600_000} h` : `${Math.round(ttlMs / 60_000)} min`;
  return [
    where,
    {
      text: `No administrator exists yet. Open this link to create the first one (works once, for ${validity}):\n\n  ${link}\n\n${CLI_ALTERNATIVE}\n`,
      msg: `No administrator exists yet: the one-time setup link (secret_value) creates the first one (works once, for ${validity}). ${CLI_ALTERNATIVE}`,
      fields: { expires_at: setup.expiresAt },
      secret: { kind: 'admin_setup_link', value: link },
    },
  ];
}

/** The terminal text of adminSignInAnnouncements ('' before `app` listens). */
export async function adminSignInHint(ctx: AppContext, app: App): Promise<string> {
  return (await adminSignInAnnouncements(ctx, app)).map((a) => a.text).join('');
}
