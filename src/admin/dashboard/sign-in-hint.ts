/**
 * What `npm start` prints about the dashboard: where it is, and, while no administrator exists,
 * how to create the first one (the CLI; there is deliberately no sign-up page).
 */
import type { AppContext } from '../../app-context.ts';
import type { App } from '../../app.ts';
import { publicUrl } from '../../config/config.ts';
import { countAdminUsers } from '../sessions/admin-user.service.ts';

/** The lines to print once `app` listens ('' before it does). */
export async function adminSignInHint(ctx: AppContext, app: App): Promise<string> {
  const address = app.server.address();
  if (!address || typeof address === 'string') return '';
  const dashboard = `${publicUrl(ctx.config, address.port)}/admin`;
  if ((await countAdminUsers(ctx.database.db)) > 0) return `Admin dashboard: ${dashboard}\n`;
  const create = 'npx store-api admin create --email you@example.com';
  // The embedded database admits one process at a time, so the CLI can only run while the server is stopped.
  const how = ctx.database.backend === 'pglite'
    ? `stop the server (Ctrl+C), run\n\n  ${create}\n\nthen npm start again and sign in.`
    : `run (in another terminal)\n\n  ${create}\n\nthen sign in.`;
  return `Admin dashboard: ${dashboard}\nNo administrator exists yet. To create one, ${how}\n`;
}
