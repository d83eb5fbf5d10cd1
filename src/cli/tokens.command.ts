/** `store-api tokens create|list|revoke`: API tokens from the command line. */
import type { Command } from 'commander';
import { SCOPES, createToken, listTokens, revokeToken, type Scope, type TokenMaker } from '../tokens/token.service.ts';
import { parseIsoTimestamp } from '../shared/time.ts';
import { CliUsageError, exitWithError, withContext } from './run-command.ts';

function parseScopes(value: string): Scope[] {
  const scopes = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (bad.length > 0) throw new CliUsageError(`Unknown scope(s): ${bad.join(', ')}. Known: ${SCOPES.join(', ')}`);
  return scopes as Scope[];
}

/** Who made a key, as `tokens list` prints it (decision 0026). */
function makerText(maker: TokenMaker): string {
  if (maker.kind === 'operator') return 'the operator (CLI)';
  return maker.removed ? `${maker.email} (removed)` : `${maker.email} (${maker.role})`;
}

export function registerTokenCommands(program: Command): void {
  const tokens = program.command('tokens').description('Create, list and revoke API tokens');

  tokens
    .command('create')
    .description('Create an API token and print it (it is shown only once)')
    .requiredOption('--name <name>', 'who or what uses the token, e.g. erp')
    .option('--scopes <list>', `comma-separated scopes (${SCOPES.join(', ')}); default: all four read scopes`)
    .option('--expires-at <iso>', 'expiry as an ISO 8601 timestamp')
    .option('--json', 'print JSON instead of text')
    .action((opts: { name: string; scopes?: string; expiresAt?: string; json?: boolean }) => {
      let scopes: Scope[] | undefined;
      let expiresAt: string | null = null;
      try {
        // Check the options before touching the database.
        scopes = opts.scopes ? parseScopes(opts.scopes) : undefined;
        expiresAt = opts.expiresAt ? (parseIsoTimestamp(opts.expiresAt) ?? null) : null;
        if (opts.expiresAt && !expiresAt) throw new CliUsageError(`--expires-at: not an ISO 8601 timestamp: ${opts.expiresAt}`);
      } catch (error) {
        exitWithError(error);
      }
      return withContext(
        async (ctx) => {
          const { token, summary } = await createToken(ctx.database.db, { name: opts.name, scopes, expiresAt, maxKeysOfStore: ctx.config.STORE_MAX_API_KEYS });
          if (opts.json) process.stdout.write(`${JSON.stringify({ ...summary, token })}\n`);
          else
            process.stdout.write(
              `Created token "${summary.name}" (${summary.id}) with scopes ${summary.scopes.join(', ')}.\nStore it now; it is not shown again:\n\n${token}\n`,
            );
        },
        { whileServerRuns: "create the key in the running server's dashboard (/admin, Integrations → API keys) or with POST /admin/api/v1/tokens" },
      );
    });

  tokens
    .command('list')
    .description('List API tokens (never their secrets)')
    .option('--json', 'print JSON instead of a table')
    .action((opts: { json?: boolean }) =>
      withContext(
        async (ctx) => {
          const all = await listTokens(ctx.database.db);
          if (opts.json) {
            process.stdout.write(`${JSON.stringify(all)}\n`);
            return;
          }
          if (all.length === 0) process.stdout.write('No tokens.\n');
          for (const t of all) {
            process.stdout.write(
              `${t.id}  ${t.prefix}…  ${t.status.padEnd(7)}  ${t.name}  [${t.scopes.join(',')}]  made by ${makerText(t.made_by)}  created ${t.created_at}${t.expires_at ? `  expires ${t.expires_at}` : ''}${t.last_used_at ? `  last used ${t.last_used_at}` : ''}\n`,
            );
          }
        },
        { whileServerRuns: "see the keys in the running server's dashboard (/admin, Integrations → API keys) or with GET /admin/api/v1/tokens" },
      ),
    );

  tokens
    .command('revoke')
    .description('Revoke an API token by id or prefix; takes effect on its next request')
    .argument('<id-or-prefix>')
    .action((idOrPrefix: string) =>
      withContext(
        async (ctx) => {
          const t = await revokeToken(ctx.database.db, idOrPrefix);
          process.stdout.write(`Revoked token "${t.name}" (${t.id}).\n`);
        },
        { whileServerRuns: "revoke it in the running server's dashboard (/admin, Integrations → API keys) or with POST /admin/api/v1/tokens/:id/revoke" },
      ),
    );
}
