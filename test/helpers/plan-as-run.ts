/**
 * The plan PostgreSQL gives a statement as the service ran it: its statements are recorded
 * (`observeStatements`), then its planner settings (db/index-reads.ts: the statement of its
 * transaction that set them, or those of the connection it ran on) and an EXPLAIN of the statement
 * are run in one transaction, rolled back.
 */
import { CompiledQuery, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { asPlatform, observeStatements } from '../../src/db/store-scope.ts';

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

export interface RecordedStatement {
  readonly sql: string;
  readonly parameters: readonly unknown[];
  /** Run on a connection reading by index only (db/index-reads.ts `readsByIndex`). */
  readonly byIndex: boolean;
}

/** Every node of a plan. */
export function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}

/** The statements `run` has the database run (across stores), with what `run` returned. */
export async function recordStatements<T>(run: () => Promise<T>): Promise<{ result: T; statements: RecordedStatement[] }> {
  const statements: RecordedStatement[] = [];
  observeStatements((text, parameters, _scope, byIndex) => {
    statements.push({ sql: text, parameters, byIndex });
  });
  try {
    return { result: await asPlatform(run), statements };
  } finally {
    observeStatements(undefined);
  }
}

/**
 * The settings `statements` ran with to read by index only, as a statement: the one of theirs that
 * set them for its transaction, else (every one of them run on a connection that has them) the
 * same settings for the transaction planAsRun replays them in; undefined when they had none.
 */
export function settingsOf(statements: readonly RecordedStatement[]): RecordedStatement | undefined {
  const set = statements.find((s) => s.sql.includes("set_config('enable_seqscan', 'off', true)"));
  if (set) return set;
  if (statements.length === 0 || !statements.every((s) => s.byIndex)) return undefined;
  return { sql: "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)", parameters: [], byIndex: true };
}

class RolledBack extends Error {}

/** The plan of `statement` after `settings` (when given) in one transaction, rolled back. */
export async function planAsRun(db: Kysely<Database>, settings: RecordedStatement | undefined, statement: RecordedStatement): Promise<PlanNode> {
  let plan: PlanNode | undefined;
  await asPlatform(() =>
    db.transaction().execute(async (trx) => {
      if (settings) await trx.executeQuery(CompiledQuery.raw(settings.sql, [...settings.parameters]));
      const { rows } = await trx.executeQuery<{ 'QUERY PLAN': [{ Plan: PlanNode }] | string }>(
        CompiledQuery.raw(`EXPLAIN (FORMAT JSON) ${statement.sql}`, [...statement.parameters]),
      );
      const cell = rows[0]!['QUERY PLAN'];
      plan = (typeof cell === 'string' ? JSON.parse(cell) : cell)[0].Plan as PlanNode;
      throw new RolledBack();
    }),
  ).catch((error: unknown) => {
    if (!(error instanceof RolledBack)) throw error;
  });
  return plan!;
}

/** The scans of `plan` over `relations` that read a whole table or go by a bitmap (not an index walk or probe). */
export function wholeReadsOf(plan: PlanNode, relations: readonly string[]): string[] {
  return nodesOf(plan)
    .filter((n) => n['Relation Name'] !== undefined && relations.includes(n['Relation Name']))
    .filter((n) => n['Node Type'] === 'Seq Scan' || n['Node Type'] === 'Bitmap Heap Scan')
    .map((n) => `${n['Node Type']} on ${n['Relation Name']}`);
}
