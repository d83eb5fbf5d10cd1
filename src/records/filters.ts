/** Parsers shared by the resources' query filters; each throws a 400 naming the parameter. */
import { invalidParameter } from '../shared/problem.ts';
import { parseIsoTimestamp } from '../shared/time.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Checks a UUID-valued parameter; 400 naming it when malformed. */
export function requireUuid(value: string, param: string): string {
  if (!UUID.test(value)) throw invalidParameter(param, 'must be a UUID');
  return value.toLowerCase();
}

/** The `since` filter's value as timestamptz text; 400 naming it when it is no date. */
export function sinceOf(value: unknown): string {
  const since = parseIsoTimestamp(String(value));
  if (!since) throw invalidParameter('since', 'must be an ISO 8601 date or timestamp (e.g. 2026-01-31 or 2026-01-31T12:00:00Z, years 0001–9999)');
  return since;
}
