/**
 * Runs a migration script statement by statement: both drivers send parameterised (prepared)
 * queries, which take one statement each. Statements end with `;` at the end of a line; keep
 * function bodies free of that pattern.
 */
import { sql, type Kysely } from 'kysely';

export async function executeScript<DB>(db: Kysely<DB>, script: string): Promise<void> {
  const statements = script
    .split(/;\s*$/m)
    .map((s) => s.trim())
    .filter((s) => s.replace(/--.*$/gm, '').trim().length > 0);
  for (const statement of statements) await sql.raw(statement).execute(db);
}
