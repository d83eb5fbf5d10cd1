/**
 * Cursors (docs/contract/decisions.md "Lists, cursors, exports"). A cursor is either a plain ISO 8601 timestamp
 * ("strictly after this instant", or before it with order=desc) or a `next_cursor` handed out by a
 * list: the ISO timestamp of the last record returned, `_`, and that record's id as a tie-breaker,
 * so records sharing one last_modified are never skipped or repeated across pages.
 */
import { parseIsoTimestamp } from './time.ts';
import { invalidParameter } from './problem.ts';

export interface Cursor {
  /** Canonical timestamp text with offset, microsecond precision. */
  readonly ts: string;
  /** Tie-breaker: the id of the last record returned, when the cursor came from a list. */
  readonly id?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const CURSOR_SEPARATOR = '_';

/** Parses a `cursor` query value; throws a 400 naming `param` when it is neither form. */
export function parseCursor(value: string, param = 'cursor'): Cursor {
  const at = value.indexOf(CURSOR_SEPARATOR);
  const tsText = at === -1 ? value : value.slice(0, at);
  const id = at === -1 ? undefined : value.slice(at + 1);
  const ts = parseIsoTimestamp(tsText, { dateOnly: id === undefined });
  if (!ts || (id !== undefined && !UUID.test(id))) {
    throw invalidParameter(param, 'must be an ISO 8601 timestamp (e.g. 2026-01-31T12:00:00Z, years 0001–9999) or a next_cursor value returned by this API');
  }
  return { ts, id };
}

/** The next_cursor of a page whose last record has ISO timestamp `iso` and id `id`. */
export function formatCursor(iso: string, id: string): string {
  return `${iso}${CURSOR_SEPARATOR}${id}`;
}
