/** TypeBox building blocks shared by the record schemas of every resource and the API's parameters. */
import { Type, type TSchema } from '@sinclair/typebox';

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
export const StringEnum = <T extends readonly string[]>(values: T, options: Record<string, unknown> = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601, UTC, microseconds', examples: ['2026-11-21T14:05:30.770123Z'] });
export const Uuid = Type.String({ format: 'uuid' });
/** A record's version (decision 0057): 1 when created, one more with every change of the record, its children included. */
export const Version = Type.Integer({
  minimum: 1,
  description: "The record's version: 1 when created, one more with every change (of the record or of its variants, images or items); keep the highest",
  examples: [3],
});
export const Money = Type.Number({ description: 'Exact amount, at most 2 decimals' });
/**
 * An object of named values whose names are bounded: TypeBox's `Type.Record` compiles a string key to
 * `patternProperties` and drops the key's own bounds, so an empty or overlong name passed validation
 * (an attribute key over 100 characters became a `next_cursor` the attributes list refused).
 * `propertyNames` keeps them.
 */
export const NamedValues = <V extends TSchema>(key: { minLength: number; maxLength: number }, value: V, options: Record<string, unknown> = {}) =>
  Type.Record(Type.String(key), value, { ...options, propertyNames: { type: 'string', ...key } });
/** ISO date or timestamp filter: only records created after it. */
export const sinceParam = Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601 date or timestamp; only records created after it' });
