/**
 * `document_previous(previous, before, after)` (migrations 0039 and 0050, decision 0057): the fields
 * of a stored document whose value before the transaction (`previous`' where an earlier statement of
 * it kept one, else `before`'s) differs from `after`'s, as JSON values (not as text), in `before`'s
 * order, `version` and `last_modified` left out; null for a record created in the transaction. The
 * cheaper form of 0050 compares the text of the two sides first: these cases hold it to the answer
 * of the definition, on every back end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';

const variants = [{ id: 'v1', name: 'Small', attributes: { size: 'S' } }];
const before = { id: 'p1', name: 'Shirt', price: 13.1, stock: 4, variants, last_modified: 't1', version: 2 };

describe.each(backends)('document_previous (%s)', (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(async () => database?.close());

  /** The function's answer over the documents' texts as given (their formatting kept). */
  const previousOf = async (previous: string, beforeText: string | null, afterText: string) => {
    const { rows } = await sql<{ p: string | null }>`
      SELECT document_previous(${previous}::json, ${beforeText}::json, ${afterText}::json)::text AS p`.execute(database.db);
    return rows[0]!.p === null ? null : (JSON.parse(rows[0]!.p) as Record<string, unknown>);
  };
  const text = (doc: object) => JSON.stringify(doc);

  it.each([
    ['nothing changed (stamp and version aside)', '{}', before, { ...before, last_modified: 't2', version: 3 }, {}],
    ['one field', '{}', before, { ...before, stock: 5 }, { stock: 4 }],
    ['a child array, whole', '{}', before, { ...before, variants: [{ ...variants[0], name: 'S' }] }, { variants }],
    ['several, in the order of the document before', '{}', before, { ...before, stock: 0, name: 'Tee' }, { name: 'Shirt', stock: 4 }],
    ['a field the document after lacks', '{}', before, { id: 'p1', name: 'Shirt', price: 13.1, variants }, { stock: 4 }],
    ['a value changed back within the transaction', '{"name":"Tee"}', { ...before, name: 'Shirt' }, { ...before, name: 'Tee' }, {}],
    ['a value changed twice within the transaction', '{"stock":1}', before, { ...before, stock: 9 }, { stock: 1 }],
  ])('%s', async (_case, previous, b, a, expected) => {
    const answer = await previousOf(previous, text(b), text(a));
    expect(answer).toEqual(expected);
    // In the document's order, as json_object_agg gives them.
    expect(Object.keys(answer!)).toEqual(Object.keys(expected));
  });

  it('compares values, not their text: numbers and spacing written differently are equal', async () => {
    const b = '{"id":"p1","price":13.10,"variants":[{"attributes": {"size": "S"}}],"stock":4}';
    const a = '{"id": "p1", "price": 13.1, "variants": [{"attributes":{"size":"S"}}], "stock": 5}';
    expect(await previousOf('{}', b, a)).toEqual({ stock: 4 });
  });

  it('keeps the old values as they were written, and answers null for a record created in the transaction', async () => {
    const { rows } = await sql<{ p: string }>`
      SELECT document_previous('{}'::json, '{"price":13.10,"stock":4}'::json, '{"price":13.2,"stock":4}'::json)::text AS p`.execute(database.db);
    expect(rows[0]!.p).toMatch(/"price" : 13\.10/);
    expect(await previousOf('{}', null, text(before))).toBeNull();
  });
});
