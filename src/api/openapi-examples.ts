/**
 * Example events for the OpenAPI document and the dashboard: each event type's `data` is the example
 * record of its resource's declaration (`example`, validated against the record schema by
 * test/production/openapi.test.ts); an `*.updated` event's `previous` is its declaration's `events.examplePrevious`.
 */
import { EVENT_EXAMPLES, EVENT_PREVIOUS_EXAMPLES, type FeedEventType } from '../resources/registry.ts';

/** The example body of a webhook (and events feed entry) of `type`. */
export function exampleEvent(type: FeedEventType | 'ping'): Record<string, unknown> {
  const base = { id: '0193a5c3-0b13-7e55-b6c7-d8e9f0a1b2c3', type, created_at: '2026-11-21T14:05:30.770123Z' };
  if (type === 'ping') {
    return { ...base, data: { endpoint_id: '0193a5c1-1111-7222-8333-444455556666', message: 'Test event sent on demand from the admin API' } };
  }
  const previous = EVENT_PREVIOUS_EXAMPLES[type];
  return previous ? { ...base, data: EVENT_EXAMPLES[type], previous } : { ...base, data: EVENT_EXAMPLES[type] };
}
