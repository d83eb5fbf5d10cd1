/**
 * Response and parameter schemas of the read API (TypeBox). They validate input, document every
 * response in the OpenAPI document, and are checked against real responses in the tests.
 */
import { Type, type TObject, type TSchema } from '@sinclair/typebox';
import { BOOKKEEPING_FIELDS, EVENT_DATA, FEED_EVENT_TYPES, RECORD_SCHEMAS, carriesPrevious, type FeedEventType } from '../resources/registry.ts';
import { Nullable, StringEnum } from '../shared/typebox.ts';
import { errorCodes, type ErrorCode } from '../shared/problem.ts';

/**
 * An `*.updated` event's `previous` (decision 0057): any of the record's fields but its bookkeeping
 * ones, each with the value it had before the change; a child array (variants, images, items) whole.
 */
function previousSchema(record: TObject): TSchema {
  const fields = Object.entries(record.properties).filter(([name]) => !(BOOKKEEPING_FIELDS as readonly string[]).includes(name));
  return Type.Object(Object.fromEntries(fields.map(([name, schema]) => [name, Type.Optional(schema)])), {
    additionalProperties: false,
    description:
      'The fields this change changed, each with its value before the change (a child array such as variants, images or items whole); ' +
      '`version` and `last_modified` are never listed (they change with every change). Empty when nothing else changed.',
  });
}

/**
 * One event as the webhooks POST it and the events feed lists it, per type. Unnamed on purpose: the
 * webhooks section of the OpenAPI document shows each inline, the feed references the `Event` union.
 */
export const EVENT_PAYLOADS = Object.fromEntries(
  FEED_EVENT_TYPES.map((type) => [
    type,
    Type.Object(
      {
        id: Type.String({ format: 'uuid', description: 'Event id, stable across retries' }),
        type: Type.Literal(type),
        created_at: Type.String({ format: 'date-time' }),
        data: EVENT_DATA[type],
        ...(carriesPrevious(type) ? { previous: previousSchema(EVENT_DATA[type] as TObject) } : {}),
        // Decision 0020: a webhook carries it (true) only when an administrator sent the example as a test.
        test: Type.Optional(
          Type.Literal(true, {
            description:
              'Present, and true, only on a test event an administrator sent to one endpoint (its data are an example): acknowledge it and do not act on it. Never in the events feed.',
          }),
        ),
      },
      { additionalProperties: false },
    ),
  ]),
) as unknown as Record<FeedEventType, TSchema>;

/** Any event of the feed: the union of the webhook payloads (ping excluded). */
export const Event = Type.Union(
  FEED_EVENT_TYPES.map((type) => EVENT_PAYLOADS[type]),
  {
    title: 'Event',
    description: 'A change to store data, exactly as POSTed to webhook endpoints: `data` is the full record at that moment.',
  },
);

export const Pagination = Type.Object(
  {
    next_cursor: Nullable(Type.String({ description: 'Pass back as `cursor`; null only on an empty first page' })),
    has_more: Type.Boolean(),
    limit: Type.Integer(),
  },
  { title: 'Pagination', additionalProperties: false },
);

export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: StringEnum(Object.keys(errorCodes) as ErrorCode[], { description: 'Machine-readable error code (the registry of src/shared/problem.ts)' }),
    errors: Type.Optional(Type.Array(Type.Object({ param: Type.String(), message: Type.String() }))),
  },
  { title: 'Problem' },
);

export const listOf = <T extends TSchema>(item: T) => Type.Object({ data: Type.Array(item), pagination: Pagination });
export const single = <T extends TSchema>(item: T) => Type.Object({ data: item });

// ---- query parameters ----------------------------------------------------------------------

const limitParam = (max: number, def: number) => Type.Integer({ minimum: 1, maximum: max, default: def, description: `Page size, 1–${max}, default ${def}` });
const cursorParam = Type.String({ minLength: 1, maxLength: 100, description: 'ISO 8601 timestamp or a next_cursor value' });
const orderParam = StringEnum(['asc', 'desc'] as const, { default: 'asc', description: 'Sort by last_modified' });

/** The query of a snapshot: the resource's filters and a resume cursor; no limit, no order. */
export function snapshotQuery(filters: Readonly<Record<string, TSchema>>) {
  return Type.Object(
    {
      cursor: Type.Optional(
        Type.String({
          minLength: 1,
          maxLength: 100,
          description: 'Resume after this record: the cursor of the last record received (`<last_modified>_<id>`), or any cursor of this API',
        }),
      ),
      ...filters,
    },
    { additionalProperties: false },
  );
}

/** Query of a list (isExport: limit up to 500, default 500) with the resource's own filters. */
export function listQuery(filters: Readonly<Record<string, TSchema>>, isExport = false) {
  return Type.Object(
    {
      // Optional with a default (ajv fills it in): generated clients must not have to pass it.
      limit: Type.Optional(isExport ? limitParam(500, 500) : limitParam(200, 50)),
      cursor: Type.Optional(cursorParam),
      order: Type.Optional(orderParam),
      ...filters,
    },
    { additionalProperties: false },
  );
}

/** Filters of the events feed. */
export const eventFilters = {
  type: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 300 }), {
      maxItems: 20,
      description: `Only these event types: repeat the parameter and/or separate with commas (${FEED_EVENT_TYPES.join(', ')})`,
    }),
  ),
  since: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601 date or timestamp; only events created after it' })),
};

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) }, { additionalProperties: false });

/** One distinct value of a variant attribute (GET /api/v1/attributes). */
export const AttributeValue = Type.Object(
  {
    value: Type.String(),
    variant_count: Type.Integer({ minimum: 1, description: 'How many variants carry this value under this key' }),
  },
  { title: 'AttributeValue', additionalProperties: false },
);

/** One distinct attribute key of the variants with its distinct values (the spec's external mapping). */
export const Attribute = Type.Object(
  {
    key: Type.String({ description: "The attribute name, a key of a variant's `attributes`" }),
    variant_count: Type.Integer({ minimum: 1, description: "How many variants carry this key (the sum of its values' counts)" }),
    values: Type.Array(AttributeValue, { description: 'Every distinct value of this key, in bytewise order' }),
  },
  { title: 'Attribute', additionalProperties: false },
);

/** Query of GET /api/v1/attributes: pages by key. */
export const attributeQuery = Type.Object(
  {
    limit: Type.Optional(limitParam(200, 50)),
    cursor: Type.Optional(
      Type.String({
        // Any key a variant may hold: keys written before the admin API bounded them (1-100
        // characters) can be empty or longer, and a next_cursor must always be accepted back.
        maxLength: 8000,
        description: 'The next_cursor of the previous page (the key of its last attribute): keys strictly after it',
      }),
    ),
    include_inactive: Type.Optional(Type.Boolean({ default: false, description: 'Count the variants of deactivated products too' })),
  },
  { additionalProperties: false },
);

/** All named schemas, for the OpenAPI components. */
export const namedSchemas = [...RECORD_SCHEMAS, Event, Pagination, ProblemSchema, Attribute, AttributeValue];
