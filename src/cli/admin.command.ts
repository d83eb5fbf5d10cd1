/**
 * `store-api admin create|set-password|remove-second-factor|list`: dashboard administrators. The password comes from
 * --password, else ADMIN_PASSWORD, else a prompt on the terminal that echoes nothing (asked twice).
 * Prefer the prompt or the variable: a --password value stays in the shell history.
 */
import type { Command } from 'commander';
import { createAdminUser, findAdminUser, listAdminUsers, MIN_PASSWORD_LENGTH, setAdminPassword } from '../admin/sessions/admin-user.service.ts';
import { removeSecondFactor } from '../admin/sessions/second-factor.service.ts';
import { removeAllPasskeys } from '../admin/sessions/passkey.service.ts';
import { deleteSessionsOf } from '../admin/sessions/admin-session.service.ts';
import { withContext } from './run-command.ts';
import type { AppContext } from '../app-context.ts';
import { ApiError } from '../shared/problem.ts';

/** Reads one line from the terminal without echoing it. */
function promptHidden(question: string): Promise<string> {
  const input = process.stdin;
  if (!input.isTTY) {
    return Promise.reject(new ApiError('invalid_parameter', 'No password given and no terminal to ask on: pass --password or set ADMIN_PASSWORD.'));
  }
  process.stderr.write(question);
  return new Promise((resolve, reject) => {
    let value = '';
    input.setRawMode(true);
    input.resume();
    input.setEncoding('utf8');
    const finish = (error?: Error) => {
      input.setRawMode(false);
      input.pause();
      input.off('data', onData);
      process.stderr.write('\n');
      if (error) reject(error);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return finish();
        if (ch === '\u0003') return finish(new ApiError('invalid_parameter', 'Cancelled; nothing was changed.'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else if (ch >= ' ') value += ch;
      }
    };
    input.on('data', onData);
  });
}

async function passwordFor(ctx: AppContext, given: string | undefined): Promise<string> {
  if (given) return given;
  if (ctx.config.ADMIN_PASSWORD) return ctx.config.ADMIN_PASSWORD;
  const first = await promptHidden(`Password (at least ${MIN_PASSWORD_LENGTH} characters): `);
  const second = await promptHidden('Repeat the password: ');
  if (first !== second) throw new ApiError('invalid_parameter', 'The passwords do not match; nothing was changed.');
  return first;
}

export function registerAdminCommands(program: Command): void {
  const admin = program.command('admin').description('Create and manage administrators of the dashboard (/admin)');

  admin
    .command('create')
    .description('Create an administrator who can sign in to the dashboard')
    .requiredOption('--email <email>', 'the address to sign in with')
    .option('--password <password>', 'the password (default: ADMIN_PASSWORD, else asked for without echo)')
    .action((opts: { email: string; password?: string }) =>
      withContext(
        async (ctx) => {
          const password = await passwordFor(ctx, opts.password);
          const user = await createAdminUser(ctx.database.db, { email: opts.email, password });
          process.stdout.write(`Created administrator ${user.email}. Sign in at /admin on the running server.\n`);
        },
        { whileServerRuns: 'while no administrator exists, open the one-time setup link the server printed at start (restart it for a new one)' },
      ),
    );

  admin
    .command('set-password')
    .description('Set a new password for an administrator (signs them out everywhere)')
    .requiredOption('--email <email>', "the administrator's address")
    .option('--password <password>', 'the new password (default: ADMIN_PASSWORD, else asked for without echo)')
    .action((opts: { email: string; password?: string }) =>
      withContext(async (ctx) => {
        const password = await passwordFor(ctx, opts.password);
        const user = await setAdminPassword(ctx.database.db, { email: opts.email, password });
        process.stdout.write(`Changed the password of ${user.email}; their sessions were ended.\n`);
      }),
    );

  // The way back for an owner who lost device and recovery codes with no other owner to turn the
  // second factor off: whoever runs the machine can already set a password (decision 0028).
  admin
    .command('remove-second-factor')
    .description("Turn off an administrator's second factor (lost device and recovery codes); signs them out everywhere")
    .requiredOption('--email <email>', "the administrator's address")
    .action((opts: { email: string }) =>
      withContext(async (ctx) => {
        const user = await findAdminUser(ctx.database.db, opts.email);
        if (!user) throw new ApiError('not_found', `No administrator with the email '${opts.email}'.`);
        const totp = await removeSecondFactor(ctx.database.db, user.id);
        // Her passkeys too (decision 0063): the lost device may hold them.
        const passkeys = await removeAllPasskeys(ctx.database.db, user.id);
        if (!totp && passkeys === 0) {
          process.stdout.write(`${user.email} has no second factor; nothing was changed.\n`);
          return;
        }
        await deleteSessionsOf(ctx.database.db, user.id);
        process.stdout.write(`Turned off the second factor of ${user.email} and ended their sessions. They can set up a new one after signing in.\n`);
      }),
    );

  admin
    .command('list')
    .description('List administrators')
    .action(() =>
      withContext(async (ctx) => {
        const users = await listAdminUsers(ctx.database.db);
        if (users.length === 0) process.stdout.write('No administrators. Create one with: store-api admin create --email you@example.com\n');
        for (const u of users)
          process.stdout.write(`${u.email}  ${u.role}  created ${u.created_at}${u.last_sign_in_at ? `  last sign-in ${u.last_sign_in_at}` : ''}\n`);
      }),
    );
}
