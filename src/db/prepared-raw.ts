/**
 * Statements the embedded database runs again and again (a list page, a snapshot chunk: the same
 * text with another cursor) kept prepared in its one session, each run answered as the protocol's
 * bytes (decision 0050). Loaded by the database's worker (db/pglite-worker.ts): erasable syntax
 * only, nothing imported.
 *
 * Why: PostgreSQL parses, analyses and plans a statement sent as text every time. For a page of
 * 200 products (three nested selects, a window, three ordered aggregates) planning alone took
 * 0.3–0.4 ms of the ~1.4 ms the statement held the database's thread under V8's baseline
 * WebAssembly code, which runs PGlite; the thread is what bounds the embedded list.
 *
 * How: the statement is parsed once under a name (Parse), then each run binds its parameters as
 * text (Bind), executes (Execute) and ends (Sync): PostgreSQL's extended protocol. A prepared
 * statement with parameters is planned for its values on each of its first five runs and after
 * that only when the generic plan looks no cheaper; a page's generic plan always looks dearer (it
 * cannot know how many rows follow the cursor), so the plan would be made anew at every run. The
 * run is therefore bound with `plan_cache_mode = force_generic_plan`, set just before and reset
 * just after (GUC changes are the session's, so every other statement keeps the default). The
 * generic plan of such a statement is the custom one without the cursor's values: an index scan
 * from the cursor, stopped by the LIMIT.
 *
 * The answer (DataRow messages, then CommandComplete) is read by the HTTP thread with
 * `rowsOfMessages`; an ErrorResponse in it is thrown there as the statement's error.
 */

const utf8 = new TextEncoder();

/** One protocol message: its type byte, its length, then `parts`. */
function message(type: string, parts: readonly Uint8Array[]): Uint8Array {
  const length = parts.reduce((sum, part) => sum + part.length, 4);
  const out = new Uint8Array(1 + length);
  out[0] = type.charCodeAt(0);
  new DataView(out.buffer).setInt32(1, length);
  let at = 5;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

const cstring = (text: string) => utf8.encode(`${text}\0`);
const int16 = (value: number) => {
  const out = new Uint8Array(2);
  new DataView(out.buffer).setInt16(0, value);
  return out;
};
const int32 = (value: number) => {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setInt32(0, value);
  return out;
};

/** A simple-query message ('Q') holding `text`. */
function simpleQueryMessage(text: string): Uint8Array {
  return message('Q', [cstring(text)]);
}

const parseMessage = (name: string, text: string) => message('P', [cstring(name), cstring(text), int16(0)]);
const closeMessage = (name: string) => message('C', [utf8.encode('S'), cstring(name)]);
const EXECUTE = message('E', [cstring(''), int32(0)]);
const SYNC = message('S', []);
const GENERIC = simpleQueryMessage('SET plan_cache_mode = force_generic_plan');
const RESET = simpleQueryMessage('RESET plan_cache_mode');

/** Bind of the unnamed portal to statement `name`, every parameter in text (null for NULL), every result column in text. */
function bindMessage(name: string, params: readonly (string | null)[]): Uint8Array {
  const parts: Uint8Array[] = [cstring(''), cstring(name), int16(0), int16(params.length)];
  for (const param of params) {
    if (param === null) parts.push(int32(-1));
    else {
      const bytes = utf8.encode(param);
      parts.push(int32(bytes.length), bytes);
    }
  }
  parts.push(int16(0));
  return message('B', parts);
}

/** Whether the protocol answer `bytes` holds an ErrorResponse (type 'E' at a message's start). */
function hasError(bytes: Uint8Array, length: number): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset, length);
  for (let at = 0; at + 5 <= length; at += 1 + view.getInt32(at + 1)) if (bytes[at] === 0x45) return true;
  return false;
}

/**
 * The session's prepared statements by text, at most `max` (the least recently run closed first):
 * `run` sends the messages of one run to `send` (each one PGlite's execProtocolRawStream call,
 * whose output the caller collects) and, when the statement was prepared by this run and the answer
 * holds an error, forgets it (a statement that fails to parse is never named).
 */
export class PreparedStatements {
  readonly #names = new Map<string, string>();
  #next = 0;
  readonly #max: number;

  constructor(max = 64) {
    this.#max = max;
  }

  async run(
    text: string,
    params: readonly (string | null)[],
    send: (message: Uint8Array) => Promise<void>,
    answer: () => { bytes: Uint8Array; length: number },
  ): Promise<void> {
    let name = this.#names.get(text);
    const fresh = name === undefined;
    // The plan is made at Bind (a named statement's, at its first): the setting holds from here.
    await send(GENERIC);
    try {
      if (name === undefined) {
        name = `store_api_${this.#next++}`;
        const oldest = this.#names.size >= this.#max ? this.#names.entries().next().value : undefined;
        if (oldest) {
          this.#names.delete(oldest[0]);
          await send(closeMessage(oldest[1]));
        }
        await send(parseMessage(name, text));
      } else this.#names.delete(text);
      // Re-inserted: the map's order is the order of last use.
      this.#names.set(text, name);
      await send(bindMessage(name, params));
      await send(EXECUTE);
      await send(SYNC);
    } finally {
      await send(RESET);
    }
    if (fresh) {
      const { bytes, length } = answer();
      if (hasError(bytes, length)) {
        this.#names.delete(text);
        await send(closeMessage(name!));
        await send(SYNC);
      }
    }
  }
}
