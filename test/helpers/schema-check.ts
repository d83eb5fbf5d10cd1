/** Checks response bodies against the API's own TypeBox schemas (Ajv with formats, strict types). */
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { TSchema } from '@sinclair/typebox';
import { expect } from 'vitest';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const ajv = addFormats(new Ajv({ allErrors: true, strict: false }));
const cache = new WeakMap<TSchema, ReturnType<Ajv['compile']>>();

/** Asserts that `value` matches `schema`, printing Ajv's errors when it does not. */
export function expectSchema(schema: TSchema, value: unknown): void {
  let validate = cache.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    cache.set(schema, validate);
  }
  const ok = validate(value);
  expect(ok ? [] : validate.errors).toEqual([]);
}
