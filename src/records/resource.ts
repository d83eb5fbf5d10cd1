/**
 * The declaration of one store resource. Everything the service does with a resource is derived
 * from it (resources/registry.ts): the read API's list, single GET and export routes with their
 * schemas and scope, the OpenAPI document, the event types with their scope and payload schema,
 * the event writer, the dashboard's scope and event lists, the client's types and the sync tool's
 * mirror tables. Adding a resource is one declaration; src/README.md walks through it.
 */
import type { Static, TObject, TSchema } from '@sinclair/typebox';
import type { RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';
import type { DocumentKind } from '../db/documents.ts';

/** Parsed query of a list or export (validated by its schema already). */
export type ResourceQuery = Record<string, unknown>;

export interface ResourceDeclaration<
  Name extends string = string,
  ReadScope extends string = string,
  EventPrefix extends string = string,
  EventKind extends string = string,
  RecordSchema extends TSchema = TSchema,
> {
  /** Resource name, e.g. 'products' (also the sync tool's mirror table). */
  readonly name: Name;
  /** URL segment under /api/v1, e.g. 'products' or 'inventory/movements'. */
  readonly path: string;
  /** Human name for messages, e.g. 'product'. */
  readonly noun: string;
  /** What a reader of it sees, for the dashboard's scope hints, e.g. 'products, variants and images'. */
  readonly summary: string;
  /** Group label (OpenAPI tag, dashboard group), e.g. 'Products'; resources may share one. */
  readonly label: string;
  /** The scope a token needs to read it and to see its events. */
  readonly scope: ReadScope;
  /** The store table whose rows are the records (keyset index and forward trigger, test/db/store-tables.test.ts). */
  readonly table: string;
  /** Field of the record that identifies it. */
  readonly key: 'id' | 'product_id';
  /** The record's JSON schema, with a `title` (its name in the OpenAPI document). */
  readonly record: RecordSchema;
  /** Named schemas nested in the record (OpenAPI components). */
  readonly nested?: readonly TSchema[];
  /** The records as SQL: FROM, keys, JSON and base condition. */
  readonly source: ListSource;
  /** Query filters beyond limit/cursor/order. */
  readonly filters: Readonly<Record<string, TSchema>>;
  /** SQL conditions from the parsed query. */
  readonly conditions: (query: ResourceQuery) => RawBuilder<unknown>[];
  /** Whether GET /{path}/{id} exists. */
  readonly single: boolean;
  readonly description: { readonly list: string; readonly get?: string; readonly export: string };
  /**
   * Event types `${prefix}.${kind}` whose `data` is one record; omit for a resource without events.
   * `when`: what makes them, in a few words (docs/webhooks.md's table of event types is generated
   * from it, test/docs/generated-blocks.test.ts). An `updated` event carries `previous` too: the fields
   * the change changed, with their values before it (decision 0057).
   */
  readonly events?: {
    readonly prefix: EventPrefix;
    readonly kinds: readonly EventKind[];
    readonly when?: string;
    /**
     * An example of an `updated` event's `previous` (decision 0057): fields of `example` as they were
     * before the change (the event catalog and the OpenAPI webhooks show it; `{}` when omitted).
     */
    readonly examplePrevious?: Readonly<Record<string, unknown>>;
  };
  /**
   * Admin writes of a flat resource (one row of `table` per record, columns named as the body's
   * fields): POST /admin/api/v1/{path} creates with `create`'s body, PATCH /admin/api/v1/{path}/{id}
   * updates with `update`'s; both stamp last_modified and append `${prefix}.created` / `.updated`
   * in the same transaction (resources/record-writes.ts). Resources with nested rows have their own services.
   * `summary` overrides the operations' OpenAPI summaries (default `Create a {noun}`, `Update a {noun}`).
   */
  readonly adminWrites?: {
    readonly create: TObject;
    readonly update: TObject;
    readonly summary?: { readonly create?: string; readonly update?: string };
  };
  /** Query a mirror adds to every list and export call (e.g. inactive products too). */
  readonly mirrorQuery?: Readonly<Record<string, string>>;
  /**
   * The stored document (db/documents.ts) `source.json` serves: built once per write by statement
   * triggers on `table` and on every `children` table, from `build`, the JSON of the row of `table`
   * aliased `alias`, into the column `column` (`doc` unless two documents share a table).
   */
  readonly document: StoredDocument;
  /** An example record in the exact shape of `record` (OpenAPI examples of its events; test/production/openapi.test.ts validates it). */
  readonly example: Readonly<Record<string, unknown>>;
  /** The OpenAPI tag's description of `label`; resources sharing a label give it once (the first in RESOURCES). */
  readonly labelDescription?: string;
}

/** A record's stored JSON: see ResourceDeclaration.document. */
export interface StoredDocument {
  /** Name in `store-api documents check` and its reports, e.g. 'product'. */
  readonly name: string;
  readonly alias: string;
  readonly column: string;
  /**
   * One SQL expression without parameters: the record's JSON from the row aliased `alias`; a child
   * table's rows joined by their store as well as their key (db/documents.ts `childOfStore`).
   */
  readonly build: RawBuilder<unknown>;
  /**
   * `build` without naming any store, for a database before migration 0031 (its tables have no
   * store_id; migrations 0009 and 0016 install the triggers from today's declarations); omit when
   * `build` names none (it reads no other table).
   */
  readonly buildBeforeStores?: RawBuilder<unknown>;
  /** Other tables `build` reads, each with its column naming the row of `table` it belongs to. */
  readonly children?: readonly { readonly table: string; readonly key: string }[];
}

/** Declares a resource, keeping its literal names so event types and scopes stay checked types. */
export function defineResource<
  const Name extends string,
  const ReadScope extends string,
  const EventPrefix extends string = never,
  const EventKind extends string = never,
  RecordSchema extends TSchema = TSchema,
>(
  declaration: ResourceDeclaration<Name, ReadScope, EventPrefix, EventKind, RecordSchema>,
): ResourceDeclaration<Name, ReadScope, EventPrefix, EventKind, RecordSchema> {
  return declaration;
}

/** A record of the declaration as the read API serves it: its record schema's static type. */
export type RecordOf<R extends ResourceDeclaration> = Static<R['record']>;

/** The event types of a declaration, e.g. 'product.created' | 'product.updated'. */
export type EventTypesOf<R> = R extends ResourceDeclaration<string, string, infer P, infer K> ? `${P}.${K}` : never;

/**
 * The stored documents of `resources` (resources/store-schema.ts passes every declared one).
 * `stores` false: as a database before migration 0031 has them (`buildBeforeStores`); `versions`
 * false: before migration 0039 (no `version` column, decision 0057).
 */
export function documentKindsOf(
  resources: readonly ResourceDeclaration[],
  { stores = true, versions = stores }: { stores?: boolean; versions?: boolean } = {},
): DocumentKind[] {
  return resources.map((r) => {
    const { buildBeforeStores, ...document } = r.document;
    return { ...document, build: stores ? document.build : (buildBeforeStores ?? document.build), table: r.table, stores, versions };
  });
}
