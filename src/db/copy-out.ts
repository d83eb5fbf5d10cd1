/**
 * A statement's result as the bytes PostgreSQL sends, never decoded into JavaScript strings
 * (decision 0037): `COPY (<select>) TO STDOUT (FORMAT binary)` through pg-copy-streams.
 *
 * Why: pg decodes every text value it receives into a string (pg-protocol's DataRow parser), and a
 * page or snapshot chunk of stored JSON (~200 KiB, ~1 MiB) was then encoded back to bytes for the
 * socket: two passes over every byte and a large string for the garbage collector per request. A
 * binary COPY hands the text's UTF-8 bytes over as they arrive, with each field's length in front
 * (no escaping, unlike COPY's text format), so the page's bytes pass from the database connection
 * to the HTTP response with one copy.
 *
 * COPY takes no bind parameters: the compiled statement's `$n` are replaced by quoted literals
 * (`escapeLiteral` of pg's own text form of the value, `prepareValue`). An untyped quoted literal
 * is resolved by PostgreSQL exactly as pg's untyped text parameters are (both are of type
 * `unknown` until their context types them), so the statement means what it means when run with
 * parameters; quoting is pg's, so a value cannot end its literal.
 */
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';

const { prepareValue } = (pg as unknown as { utils: { prepareValue(value: unknown): unknown } }).utils;

/** pg's text form of one parameter (null for NULL): what a Bind sends, and what a literal quotes. */
function textOf(value: unknown): string | null {
  const text = prepareValue(value);
  if (text === null || text === undefined) return null;
  if (typeof text !== 'string') throw new TypeError(`copy-out: a ${typeof text} parameter has no text form`);
  return text;
}

/** One value as a SQL literal: NULL, or pg's text form of it quoted. */
function literal(value: unknown): string {
  const text = textOf(value);
  return text === null ? 'NULL' : pg.escapeLiteral(text);
}

/**
 * `sql` with its `$1`, `$2`, … replaced by the literals of `parameters`. Placeholders inside quoted
 * strings, quoted identifiers and comments are left alone (Kysely never puts its own there).
 */
export function inlineParameters(sql: string, parameters: readonly unknown[]): string {
  let out = '';
  let i = 0;
  while (i < sql.length) {
    const ch = sql[i]!;
    if (ch === "'" || ch === '"') {
      // A quoted string or identifier: to its closing quote (a doubled quote stays inside).
      let j = i + 1;
      for (;;) {
        const close = sql.indexOf(ch, j);
        if (close === -1) throw new Error('copy-out: unterminated quote in a statement');
        if (sql[close + 1] === ch) j = close + 2;
        else {
          j = close + 1;
          break;
        }
      }
      out += sql.slice(i, j);
      i = j;
    } else if (ch === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      const j = end === -1 ? sql.length : end;
      out += sql.slice(i, j);
      i = j;
    } else if (ch === '$' && /[0-9]/.test(sql[i + 1] ?? '') && !/[A-Za-z0-9_]/.test(sql[i - 1] ?? '')) {
      let j = i + 1;
      while (j < sql.length && /[0-9]/.test(sql[j]!)) j++;
      const index = Number(sql.slice(i + 1, j)) - 1;
      if (index < 0 || index >= parameters.length) throw new Error(`copy-out: no parameter for ${sql.slice(i, j)}`);
      out += literal(parameters[index]);
      i = j;
    } else {
      out += ch;
      i++;
    }
  }
  return out;
}

/** The 11-byte signature that opens a binary COPY, then 32-bit flags and header extension length. */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/**
 * The rows of a binary COPY's output: each row its fields' bytes (null for NULL). The buffers are
 * views into `bytes`, not copies.
 */
export function parseBinaryCopy(bytes: Buffer): (Buffer | null)[][] {
  if (bytes.length < 19 || !bytes.subarray(0, 11).equals(SIGNATURE)) throw new Error('copy-out: not a binary COPY stream');
  let at = 15;
  at += 4 + bytes.readUInt32BE(at);
  const rows: (Buffer | null)[][] = [];
  for (;;) {
    const count = bytes.readInt16BE(at);
    at += 2;
    if (count === -1) return rows;
    const row = readFields(bytes, at, count);
    at = row.end;
    rows.push(row.fields);
  }
}

/**
 * `count` fields from `at`, each its 32-bit length then its bytes (-1: NULL), as binary COPY rows
 * and DataRow messages both lay them out: views of `bytes`, and where the last one ends.
 */
function readFields(bytes: Buffer, at: number, count: number): { fields: (Buffer | null)[]; end: number } {
  const fields: (Buffer | null)[] = [];
  for (let f = 0; f < count; f++) {
    const length = bytes.readInt32BE(at);
    at += 4;
    if (length === -1) fields.push(null);
    else {
      fields.push(bytes.subarray(at, at + length));
      at += length;
    }
  }
  return { fields, end: at };
}

/** An ErrorResponse's fields by their protocol codes, named as pg and PGlite name them. */
const ERROR_FIELDS: Record<string, string> = {
  S: 'severity',
  C: 'code',
  D: 'detail',
  H: 'hint',
  P: 'position',
  W: 'where',
  s: 'schema',
  t: 'table',
  c: 'column',
  d: 'dataType',
  n: 'constraint',
};

/**
 * The rows of a statement's answer from the protocol messages the embedded database answered
 * (db/prepared-raw.ts): each DataRow's fields as views of `raw` (null for NULL), as
 * `parseBinaryCopy` gives a binary COPY's. An ErrorResponse is thrown as an error with PostgreSQL's fields
 * (`code`, `detail`, …), as a statement's error is.
 */
export function rowsOfMessages(raw: Uint8Array): (Buffer | null)[][] {
  const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const rows: (Buffer | null)[][] = [];
  for (let at = 0; at + 5 <= bytes.length; ) {
    const type = bytes[at]!;
    const end = at + 1 + bytes.readInt32BE(at + 1);
    if (type === 0x44) rows.push(readFields(bytes, at + 7, bytes.readInt16BE(at + 5)).fields);
    else if (type === 0x45) throw errorOf(bytes, at + 5, end);
    at = end;
  }
  return rows;
}

/** An ErrorResponse's fields (from `start` to `end`) as an error like a statement's. */
function errorOf(bytes: Buffer, start: number, end: number): Error {
  const fields: Record<string, string> = {};
  let message = 'the database refused the statement';
  for (let f = start; f < end && bytes[f] !== 0; ) {
    const code = String.fromCharCode(bytes[f]!);
    const stop = bytes.indexOf(0, f + 1);
    const value = bytes.toString('utf8', f + 1, stop);
    if (code === 'M') message = value;
    else if (ERROR_FIELDS[code]) fields[ERROR_FIELDS[code]] = value;
    f = stop + 1;
  }
  return Object.assign(new Error(message), fields);
}

/**
 * A statement run by the database handle (db/database.ts `readRows`) whose rows' fields reach `read`
 * as the bytes PostgreSQL sent, never decoded: on PostgreSQL a binary COPY of it (parameters
 * inlined), on the embedded database the statement kept prepared in its thread (decision 0050).
 * What `read` returns is the answer. `owned`: whether the fields may be kept after `read` returns;
 * when false (the embedded database's shared area) what is kept must be copied out inside `read`.
 * The statement must return text columns only (a binary int would come as its 4 bytes from COPY).
 */
export type RowReader = <T>(
  query: { readonly sql: string; readonly parameters: readonly unknown[] },
  read: (rows: (Buffer | null)[][], owned: boolean) => T,
) => Promise<T>;

/** Each parameter in pg's text form (null for NULL), as a prepared statement's Bind sends it. */
export function textParameters(parameters: readonly unknown[]): (string | null)[] {
  return parameters.map(textOf);
}

/** Runs `COPY (<select>) TO STDOUT (FORMAT binary)` on `client` and returns its whole output. */
export async function copyBinary(client: pg.PoolClient, select: string): Promise<Buffer> {
  const stream = client.query(copyTo(`COPY (${select}) TO STDOUT (FORMAT binary)`));
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}
