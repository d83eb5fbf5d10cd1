/**
 * Type parsers shared by both back ends, so rows look alike whatever the back end: int8 → number,
 * numeric → number, timestamps/dates/intervals → their text (never a JS Date, which would drop
 * microseconds and break cursors). A module of its own because the embedded database's worker
 * thread (db/pglite-worker.ts) loads it without the rest of the database layer.
 */
const OID = { int8: 20, numeric: 1700, timestamp: 1114, timestamptz: 1184, date: 1082, interval: 1186 } as const;
const identity = (value: string) => value;
const toNumber = (value: string) => Number(value);

export const typeParsers: Record<number, (value: string) => unknown> = {
  [OID.int8]: toNumber,
  [OID.numeric]: toNumber,
  [OID.timestamp]: identity,
  [OID.timestamptz]: identity,
  [OID.date]: identity,
  [OID.interval]: identity,
};
