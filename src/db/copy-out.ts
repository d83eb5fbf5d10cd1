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
 * A field's bytes as they arrived: views, in order, of the pieces the connection read them in (one
 * piece for most fields; a page's or a snapshot chunk's records span many). Held as views, never
 * joined until something needs one buffer (decision 0068): a page's body is the one copy, a snapshot
 * chunk's pieces go to the socket as they are.
 */
export class Bytes {
  readonly length: number;
  constructor(readonly pieces: readonly Buffer[]) {
    let length = 0;
    for (const piece of pieces) length += piece.length;
    this.length = length;
  }

  static of(buffer: Buffer): Bytes {
    return new Bytes([buffer]);
  }

  /** The bytes decoded (a field spanning pieces is joined first: only small fields are decoded). */
  toString(encoding: BufferEncoding = 'utf8'): string {
    return this.pieces.length === 1 ? this.pieces[0]!.toString(encoding) : Buffer.concat(this.pieces).toString(encoding);
  }

  /** Bytes `start` to `end` (a negative `end` counts from the end), as views of the same pieces. */
  subarray(start: number, end: number = this.length): Bytes {
    if (end < 0) end += this.length;
    const out: Buffer[] = [];
    let at = 0;
    for (const piece of this.pieces) {
      const from = Math.max(start - at, 0);
      const to = Math.min(end - at, piece.length);
      if (from < to) out.push(from === 0 && to === piece.length ? piece : piece.subarray(from, to));
      at += piece.length;
      if (at >= end) break;
    }
    return new Bytes(out);
  }

  /** Copies the bytes into `target` at `offset`; returns the offset after them. */
  copyTo(target: Buffer, offset: number): number {
    for (const piece of this.pieces) offset += piece.copy(target, offset);
    return offset;
  }

  /** One buffer of the bytes: the piece itself when there is one (a view), else a joined copy. */
  toBuffer(): Buffer {
    return this.pieces.length === 1 ? this.pieces[0]! : this.copy();
  }

  /** A copy of the bytes in a buffer of their own (what outlives an area the next statement reuses). */
  copy(): Buffer {
    const out = Buffer.allocUnsafe(this.length);
    this.copyTo(out, 0);
    return out;
  }
}

/** Reads the protocol's big-endian integers and fields across the pieces a stream arrived in. */
class PieceReader {
  private piece = 0;
  private at = 0;
  constructor(private readonly pieces: readonly Buffer[]) {}

  /** The next `length` bytes as views of the pieces. */
  take(length: number): Buffer[] {
    const out: Buffer[] = [];
    while (length > 0) {
      const current = this.pieces[this.piece];
      if (current === undefined) throw new Error('copy-out: the binary COPY stream ended inside a row');
      const n = Math.min(length, current.length - this.at);
      if (n > 0) out.push(n === current.length ? current : current.subarray(this.at, this.at + n));
      this.at += n;
      length -= n;
      if (this.at === current.length) {
        this.piece++;
        this.at = 0;
      }
    }
    return out;
  }

  private number(size: 2 | 4): number {
    const current = this.pieces[this.piece];
    if (current !== undefined && this.at + size < current.length) {
      // Inside the piece (and not at its end, so the piece stays current): read in place.
      const value = size === 2 ? current.readInt16BE(this.at) : current.readInt32BE(this.at);
      this.at += size;
      return value;
    }
    const bytes = Buffer.concat(this.take(size));
    return size === 2 ? bytes.readInt16BE(0) : bytes.readInt32BE(0);
  }

  int16(): number {
    return this.number(2);
  }

  int32(): number {
    return this.number(4);
  }
}

/**
 * The rows of a binary COPY's output, given as the pieces it arrived in: each row its fields' bytes
 * (null for NULL), views of the pieces, not copies.
 */
export function parseBinaryCopy(pieces: Buffer | readonly Buffer[]): (Bytes | null)[][] {
  const reader = new PieceReader(Buffer.isBuffer(pieces) ? [pieces] : pieces);
  let signature: Buffer;
  try {
    signature = Buffer.concat(reader.take(SIGNATURE.length));
  } catch {
    throw new Error('copy-out: not a binary COPY stream');
  }
  if (!signature.equals(SIGNATURE)) throw new Error('copy-out: not a binary COPY stream');
  reader.int32(); // flags
  reader.take(reader.int32()); // header extension
  const rows: (Bytes | null)[][] = [];
  for (;;) {
    const count = reader.int16();
    if (count === -1) return rows;
    const fields: (Bytes | null)[] = [];
    for (let f = 0; f < count; f++) {
      const length = reader.int32();
      fields.push(length === -1 ? null : new Bytes(reader.take(length)));
    }
    rows.push(fields);
  }
}

/**
 * `count` fields from `at`, each its 32-bit length then its bytes (-1: NULL), as DataRow messages
 * lay them out: views of `bytes`, and where the last one ends.
 */
function readFields(bytes: Buffer, at: number, count: number): { fields: (Bytes | null)[]; end: number } {
  const fields: (Bytes | null)[] = [];
  for (let f = 0; f < count; f++) {
    const length = bytes.readInt32BE(at);
    at += 4;
    if (length === -1) fields.push(null);
    else {
      fields.push(Bytes.of(bytes.subarray(at, at + length)));
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
export function rowsOfMessages(raw: Uint8Array): (Bytes | null)[][] {
  const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const rows: (Bytes | null)[][] = [];
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
  read: (rows: (Bytes | null)[][], owned: boolean) => T,
) => Promise<T>;

/** Each parameter in pg's text form (null for NULL), as a prepared statement's Bind sends it. */
export function textParameters(parameters: readonly unknown[]): (string | null)[] {
  return parameters.map(textOf);
}

/**
 * Runs `COPY (<select>) TO STDOUT (FORMAT binary)` on `client` and returns its whole output as the
 * pieces it arrived in (pg-copy-streams' views of the socket's reads), never joined.
 */
export async function copyBinary(client: pg.PoolClient, select: string): Promise<Buffer[]> {
  const stream = client.query(copyTo(`COPY (${select}) TO STDOUT (FORMAT binary)`));
  const pieces: Buffer[] = [];
  for await (const piece of stream as AsyncIterable<Buffer>) pieces.push(piece);
  return pieces;
}
