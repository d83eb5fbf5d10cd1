/**
 * What a starting process tells its operator besides log records: where it listens, the demo token
 * of a first start, the one-time dashboard setup link (docs/decisions/0009).
 *
 * - On a terminal: the human text, as written.
 * - Anywhere else (a container, systemd, a pipe): one JSON line per announcement in the shape of the
 *   log records (level, time, pid, hostname, msg), so that every line of stdout is JSON. A line that
 *   carries a credential says `"secret": true` and holds it in `secret_value` only (never in `msg`),
 *   with `secret_kind` naming it, so that log shippers can drop or redact such lines with one rule.
 * - At LOG_LEVEL=silent: nothing at all. The demo token and the setup link are then not shown; an
 *   operator creates a token with `store-api tokens create`, and the first administrator with
 *   `store-api admin create` or from the link a start at another level prints.
 */
import { hostname } from 'node:os';

export interface Announcement {
  /** The text a terminal shows (ends with a newline). */
  text: string;
  /** The one-line message of the JSON form (never a credential). */
  msg: string;
  /** Further fields of the JSON form (never a credential). */
  fields?: Record<string, unknown>;
  /** A credential the announcement hands over: only `secret_value` of the JSON form holds it. */
  secret?: { kind: 'demo_token' | 'admin_setup_link'; value: string };
}

export type Announce = (announcement: Announcement) => void;

export interface AnnouncerOptions {
  logLevel: string;
  /** Where to write; process.stdout by default. */
  stream?: NodeJS.WritableStream & { isTTY?: boolean };
  /** Text or JSON; by default text exactly when `stream` is a terminal. */
  json?: boolean;
}

/** pino's numeric level of `info`, the level announcements carry in their JSON form. */
const INFO = 30;

export function createAnnouncer({ logLevel, stream = process.stdout, json = !stream.isTTY }: AnnouncerOptions): Announce {
  if (logLevel === 'silent') return () => {};
  if (!json) return ({ text }) => void stream.write(text);
  const host = hostname();
  return ({ msg, fields, secret }) => {
    const line = {
      level: INFO,
      time: new Date().toISOString(),
      pid: process.pid,
      hostname: host,
      ...fields,
      ...(secret ? { secret: true, secret_kind: secret.kind, secret_value: secret.value } : {}),
      msg,
    };
    stream.write(`${JSON.stringify(line)}\n`);
  };
}

/**
 * One JSON line for a process that stops on a known failure (bad configuration, unwritable data
 * directory, locked data directory …), in the shape of a pino `fatal` record. `fields` names what
 * was wrong (`variables`, `path`).
 */
export function failureLine(message: string, fields: Record<string, unknown> = {}): string {
  return `${JSON.stringify({ level: 60, time: new Date().toISOString(), pid: process.pid, hostname: hostname(), ...fields, msg: message })}\n`;
}
