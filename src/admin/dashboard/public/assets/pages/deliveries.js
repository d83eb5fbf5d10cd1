/**
 * Deliveries across all endpoints (or one, chosen in the filter), by status, searched by event or
 * delivery id, event type and date range; retry from here.
 */
import { h, replace } from '../lib/dom.js';
import { listAll } from '../lib/api.js';
import { card, errorState, loadingBlock, pageHeader } from '../lib/ui.js';
import { deliveriesPanel } from '../lib/deliveries-panel.js';

const STATUSES = new Set(['pending', 'succeeded', 'failed', 'dead']);
/** The search's fields, kept in the address like the filters (lib/delivery-search.js). */
const SEARCH_KEYS = ['id', 'event_type', 'from', 'to'];

export async function renderDeliveries(view) {
  const status = STATUSES.has(view.query.get('status')) ? view.query.get('status') : '';
  const endpointFilter = view.query.get('endpoint_id') ?? '';
  const body = h('div');
  replace(
    view.root,
    pageHeader({
      title: 'Deliveries',
      description:
        'Every attempt to deliver an event to an endpoint. A delivery that fails is retried on a schedule; after the last retry it becomes a dead letter, which you can retry from here.',
      breadcrumbs: [{ label: 'Integrations' }, { label: 'Deliveries' }],
    }),
    card({ body }),
  );
  replace(body, loadingBlock('Loading…'));
  let endpoints;
  try {
    endpoints = await listAll('/webhooks/endpoints');
  } catch (error) {
    if (error.status !== 401)
      replace(
        body,
        errorState(error, () => renderDeliveries(view)),
      );
    return undefined;
  }
  const panel = deliveriesPanel({
    endpoints,
    status,
    endpointFilter: endpoints.some((e) => e.id === endpointFilter) ? endpointFilter : '',
    search: Object.fromEntries(SEARCH_KEYS.map((key) => [key, view.query.get(key) ?? ''])),
    onFiltersChange: ({ status: s, endpointId, search: searched }) => {
      const params = new URLSearchParams();
      if (endpointId) params.set('endpoint_id', endpointId);
      if (s) params.set('status', s);
      for (const key of SEARCH_KEYS) if (searched?.[key]) params.set(key, searched[key]);
      const search = params.toString();
      // replaceState: the filters belong in the address (shareable) without a page change.
      history.replaceState(null, '', `#/deliveries${search ? `?${search}` : ''}`);
    },
  });
  replace(body, panel.element);
  return panel.cleanup;
}
