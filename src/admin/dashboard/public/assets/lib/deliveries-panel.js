/**
 * The deliveries table with its filters and retry actions, used by the Deliveries page (all
 * endpoints, endpoint chosen in a filter) and by an endpoint's page (that endpoint only).
 *
 * Selection survives refreshes (kept by id). While any shown delivery is still pending or failed
 * (waiting for a retry), the table refreshes itself every few seconds, only while the tab is
 * visible; the cleanup function stops it.
 */
import { h, replace, uid } from './dom.js';
import { get, post, query } from './api.js';
import { formatDateTime, formatNumber } from './format.js';
import { button, code, confirmDialog, deliveryStatusBadge, emptyState, errorState, loadingBlock, testBadge, timeEl, toast } from './ui.js';
import { deliverySearchForm, searchQuery } from './delivery-search.js';

const STATUSES = [
  { value: '', label: 'All' },
  { value: 'pending', label: 'Pending' },
  { value: 'succeeded', label: 'Succeeded' },
  { value: 'failed', label: 'Failed' },
  { value: 'dead', label: 'Dead' },
];
const RETRYABLE = new Set(['failed', 'dead']);
const REFRESH_MS = 3000;
const PAGE_SIZE = 50;

function lastResponse(d) {
  if (d.last_status_code) return h('span', { class: ['http-status', d.last_status_code < 300 ? 'http-ok' : 'http-bad'], text: `HTTP ${d.last_status_code}` });
  if (d.last_error) return h('span', { class: 'cell-error', title: d.last_error, text: d.last_error });
  return h('span', { class: 'muted', text: '—' });
}

function whenCell(d) {
  if ((d.status === 'pending' || d.status === 'failed') && d.next_attempt_at) {
    // Overdue means waiting for a worker, or for a paused endpoint's breaker to let it through.
    if (Date.parse(d.next_attempt_at) <= Date.now())
      return h('span', { class: 'cell-sub-inline', title: `Due since ${formatDateTime(d.next_attempt_at, { seconds: true })}`, text: 'due, waiting' });
    return h('span', {}, h('span', { class: 'cell-sub-inline', text: 'next ' }), timeEl(d.next_attempt_at));
  }
  return timeEl(d.updated_at);
}

/**
 * deliveriesPanel({ endpointId, endpoints, status, search, onFiltersChange }) → { element, cleanup }.
 * With `endpointId` the endpoint filter is fixed; otherwise `endpoints` fills its select. `search`
 * holds the id, event type and date range searched for (delivery-search.js).
 */
export function deliveriesPanel({ endpointId: fixedEndpoint, endpoints = [], status: initialStatus = '', endpointFilter = '', search = {}, onFiltersChange }) {
  const state = {
    endpointId: fixedEndpoint ?? endpointFilter,
    status: initialStatus,
    search: { id: '', event_type: '', from: '', to: '', ...search },
    items: [],
    nextCursor: null,
    hasMore: false,
    selected: new Set(),
    timer: null,
    disposed: false,
    loading: false,
  };
  const showEndpoint = !fixedEndpoint;
  const tableSlot = h('div', { class: 'deliveries-table-slot' });
  const live = h('p', { class: 'visually-hidden', 'aria-live': 'polite' });
  const updated = h('span', { class: 'muted small updated-at' });

  /* filters */
  const statusName = uid('status');
  const statusGroup = h(
    'fieldset',
    { class: 'segmented' },
    h('legend', { class: 'visually-hidden', text: 'Status' }),
    STATUSES.map((s) => {
      const id = `${statusName}-${s.value || 'all'}`;
      const radio = h('input', { type: 'radio', name: statusName, id, value: s.value, checked: s.value === state.status, class: 'segmented-input' });
      radio.addEventListener('change', () => {
        state.status = s.value;
        filtersChanged();
      });
      return [radio, h('label', { for: id, class: 'segmented-label', text: s.label })];
    }),
  );
  let endpointSelect = null;
  if (showEndpoint) {
    endpointSelect = h(
      'select',
      { id: uid('endpoint'), name: 'endpoint_id', value: state.endpointId },
      h('option', { value: '', text: 'All endpoints' }),
      endpoints.map((e) => h('option', { value: e.id, text: e.url })),
    );
    endpointSelect.addEventListener('change', () => {
      state.endpointId = endpointSelect.value;
      filtersChanged();
    });
  }

  /* actions */
  const retrySelected = button({
    write: true,
    label: 'Retry selected',
    icon: 'refresh',
    size: 'sm',
    disabled: true,
    onClick: () => retry([...state.selected]),
  });
  const retryAllDead = button({
    write: true,
    label: 'Retry all dead letters',
    icon: 'replay',
    size: 'sm',
    disabled: !state.endpointId,
    title: state.endpointId ? undefined : 'Choose an endpoint first',
    onClick: () => retryDead(),
  });
  const refresh = button({ label: 'Refresh', icon: 'refresh', size: 'sm', variant: 'ghost', onClick: () => load({ keepPages: true }) });

  function syncActions() {
    const n = state.selected.size;
    retrySelected.disabled = n === 0;
    retrySelected.querySelector('.btn-label').textContent = n ? `Retry selected (${n})` : 'Retry selected';
    retryAllDead.disabled = !state.endpointId;
    retryAllDead.title = state.endpointId ? 'Retry every dead delivery of this endpoint' : 'Choose an endpoint first';
  }

  const searchForm = deliverySearchForm({
    values: state.search,
    onSearch: (values) => {
      state.search = values;
      filtersChanged();
    },
  });

  function filtersChanged() {
    state.selected.clear();
    onFiltersChange?.({ status: state.status, endpointId: state.endpointId, search: state.search });
    syncActions();
    load({ keepPages: false });
  }

  async function retry(ids) {
    if (ids.length === 0) return;
    const { data } =
      ids.length === 1
        ? await post(`/webhooks/deliveries/${ids[0]}/retry`).then(() => ({ data: { retried: 1 } }))
        : await post('/webhooks/deliveries/retry', { delivery_ids: ids });
    state.selected.clear();
    toast(`Queued ${formatNumber(data.retried)} ${data.retried === 1 ? 'delivery' : 'deliveries'} for another attempt.`);
    syncActions();
    await load({ keepPages: true });
  }

  async function retryDead() {
    const endpoint = endpoints.find((e) => e.id === state.endpointId);
    let retried = 0;
    const confirmed = await confirmDialog({
      title: 'Retry all dead letters?',
      message: `Every dead delivery${endpoint ? ` to ${endpoint.url}` : ' of this endpoint'} is queued for a new attempt now.`,
      confirmLabel: 'Retry all',
      action: async () => {
        const { data } = await post('/webhooks/deliveries/retry', { endpoint_id: state.endpointId, all_dead: true });
        retried = data.retried;
      },
    });
    if (!confirmed) return;
    toast(
      retried ? `Queued ${formatNumber(retried)} dead ${retried === 1 ? 'letter' : 'letters'} for another attempt.` : 'There were no dead letters to retry.',
      { tone: retried ? 'success' : 'info' },
    );
    await load({ keepPages: true });
  }

  /* table */
  function render() {
    if (state.items.length === 0) {
      const filtered = state.status ? `${STATUSES.find((s) => s.value === state.status).label.toLowerCase()} ` : '';
      if (searchForm.active()) {
        replace(
          tableSlot,
          emptyState({ iconName: 'deliveries', title: `No ${filtered}deliveries match`, text: 'Change or clear the search to see more deliveries.' }),
        );
        return;
      }
      replace(
        tableSlot,
        emptyState({
          iconName: 'deliveries',
          title: `No ${filtered}deliveries`,
          text: state.status === 'dead' ? 'Nothing is in the dead letter queue.' : 'Deliveries appear here when events are sent to an endpoint.',
        }),
      );
      return;
    }
    const focusedId = document.activeElement?.closest?.('tr')?.dataset?.deliveryId;
    const focusedRole = document.activeElement?.dataset?.role;
    const selectable = state.items.filter((d) => RETRYABLE.has(d.status));
    const allBox = h('input', {
      type: 'checkbox',
      'aria-label': 'Select all retryable deliveries shown',
      checked: selectable.length > 0 && selectable.every((d) => state.selected.has(d.id)),
      disabled: selectable.length === 0,
    });
    allBox.addEventListener('change', () => {
      for (const d of selectable) {
        if (allBox.checked) state.selected.add(d.id);
        else state.selected.delete(d.id);
      }
      for (const box of tableSlot.querySelectorAll('tbody input[type="checkbox"]:not(:disabled)')) box.checked = allBox.checked;
      syncActions();
    });
    const headers = ['Status', 'Event', showEndpoint ? 'Endpoint' : null, 'Attempts', 'Last response', 'Next / updated', 'Created'].filter(Boolean);
    const rows = state.items.map((d) => {
      const canRetry = RETRYABLE.has(d.status);
      const box = h('input', {
        type: 'checkbox',
        checked: state.selected.has(d.id),
        disabled: !canRetry,
        dataset: { role: 'select' },
        'aria-label': `Select the ${d.event_type} delivery of ${formatDateTime(d.created_at, { seconds: true })}`,
      });
      box.addEventListener('change', () => {
        if (box.checked) state.selected.add(d.id);
        else state.selected.delete(d.id);
        allBox.checked = selectable.every((x) => state.selected.has(x.id));
        syncActions();
      });
      return h(
        'tr',
        { dataset: { deliveryId: d.id, status: d.status } },
        // Selecting is for retrying: a viewer, who may not retry, gets no checkboxes.
        h('td', { class: ['cell-check', 'requires-write'] }, box),
        h('td', {}, deliveryStatusBadge(d.status)),
        h(
          'th',
          { scope: 'row' },
          h('a', { href: `#/deliveries/${d.id}`, class: 'delivery-link', dataset: { role: 'open' } }, code(d.event_type)),
          testBadge(d),
        ),
        showEndpoint
          ? h(
              'td',
              { class: 'cell-endpoint-narrow' },
              h('a', { href: `#/webhooks/${d.endpoint_id}`, class: 'endpoint-link subtle', title: d.endpoint_url, text: d.endpoint_url }),
            )
          : null,
        h('td', { class: 'num' }, String(d.attempt_count)),
        h('td', { class: 'cell-response' }, lastResponse(d)),
        h('td', {}, whenCell(d)),
        h('td', { class: 'col-created' }, timeEl(d.created_at)),
        h(
          'td',
          { class: 'cell-actions' },
          canRetry
            ? button({
                write: true,
                label: 'Retry',
                size: 'sm',
                variant: 'ghost',
                ariaLabel: `Retry the ${d.event_type} delivery now`,
                dataset: { role: 'retry' },
                onClick: () => retry([d.id]),
              })
            : null,
        ),
      );
    });
    replace(
      tableSlot,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'table table-deliveries' },
          h('caption', { class: 'visually-hidden', text: 'Webhook deliveries, newest first' }),
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col', class: ['cell-check', 'requires-write'] }, allBox),
              headers.map((c) => h('th', { scope: 'col', class: c === 'Attempts' ? 'num' : c === 'Created' ? 'col-created' : undefined, text: c })),
              h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Actions' })),
            ),
          ),
          h('tbody', {}, rows),
        ),
      ),
      state.hasMore ? h('div', { class: 'load-more' }, button({ label: 'Load more', size: 'sm', onClick: () => load({ append: true }) })) : null,
    );
    if (focusedId) {
      const again = tableSlot.querySelector(`tr[data-delivery-id="${CSS.escape(focusedId)}"] [data-role="${CSS.escape(focusedRole ?? 'select')}"]`);
      if (again instanceof HTMLElement) again.focus();
    }
  }

  async function fetchPage(cursor, limit = PAGE_SIZE) {
    return get(`/webhooks/deliveries${query({ endpoint_id: state.endpointId, status: state.status, ...searchQuery(state.search), limit, cursor })}`);
  }

  async function load({ append = false, keepPages = false } = {}) {
    if (state.disposed) return;
    clearTimeout(state.timer);
    if (!append && !keepPages) replace(tableSlot, loadingBlock('Loading deliveries…'));
    try {
      const shownBefore = state.items.length;
      if (append) {
        const page = await fetchPage(state.nextCursor);
        state.items.push(...page.data);
        state.nextCursor = page.pagination?.next_cursor ?? null;
        state.hasMore = Boolean(page.pagination?.has_more);
      } else {
        // A refresh reloads as many rows as are shown, so "Load more" pages do not vanish.
        const limit = keepPages ? Math.min(200, Math.max(PAGE_SIZE, state.items.length)) : PAGE_SIZE;
        const page = await fetchPage(undefined, limit);
        state.items = page.data;
        state.nextCursor = page.pagination?.next_cursor ?? null;
        state.hasMore = Boolean(page.pagination?.has_more);
      }
      const shown = new Set(state.items.map((d) => d.id));
      for (const id of state.selected) if (!shown.has(id) || !RETRYABLE.has(state.items.find((d) => d.id === id)?.status)) state.selected.delete(id);
      if (state.disposed) return;
      render();
      syncActions();
      // "Load more" is gone or re-drawn: continue from the first row it added.
      if (append) tableSlot.querySelector(`tbody tr:nth-child(${shownBefore + 1}) a.delivery-link`)?.focus();
      updated.textContent = `Updated ${new Date().toLocaleTimeString()}`;
      // Announced when the count changes, refreshes included: a ping's row must not sit under "0 deliveries shown."
      const count = `${state.items.length} ${state.items.length === 1 ? 'delivery' : 'deliveries'} shown.`;
      if (live.textContent !== count) live.textContent = count;
    } catch (error) {
      // A value the API refused is said at its field; the table says nothing matched.
      if (error.status === 400 && !state.disposed && searchForm.showProblem(error)) {
        state.items = [];
        replace(tableSlot, emptyState({ iconName: 'deliveries', title: 'Nothing searched yet', text: 'Correct the search above.' }));
        return;
      }
      if (error.status !== 401 && !state.disposed)
        replace(
          tableSlot,
          errorState(error, () => load()),
        );
      return;
    }
    scheduleRefresh();
  }

  function scheduleRefresh() {
    clearTimeout(state.timer);
    if (state.disposed) return;
    const moving = state.items.some((d) => d.status === 'pending' || d.status === 'failed');
    if (!moving) return;
    state.timer = setTimeout(() => {
      if (document.visibilityState === 'visible') load({ keepPages: true });
      else scheduleRefresh();
    }, REFRESH_MS);
  }

  const toolbar = h(
    'div',
    { class: 'toolbar' },
    h(
      'div',
      { class: 'toolbar-filters' },
      endpointSelect
        ? h('div', { class: 'inline-field' }, h('label', { for: endpointSelect.id, class: 'inline-label', text: 'Endpoint' }), endpointSelect)
        : null,
      h('div', { class: 'inline-field' }, h('span', { class: 'inline-label', 'aria-hidden': 'true', text: 'Status' }), statusGroup),
    ),
    h('div', { class: 'toolbar-actions' }, refresh, retrySelected, retryAllDead),
  );

  const element = h('div', { class: 'deliveries-panel' }, searchForm.element, toolbar, live, tableSlot, updated);
  load();
  return {
    element,
    reload: () => load({ keepPages: true }),
    cleanup: () => {
      state.disposed = true;
      clearTimeout(state.timer);
    },
  };
}
