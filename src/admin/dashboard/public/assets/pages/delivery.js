/** One delivery: its attempts (status code, duration, response excerpt or error) and the event payload. */
import { h, replace } from '../lib/dom.js';
import { get, post } from '../lib/api.js';
import { formatDateTime, formatDuration, formatJson } from '../lib/format.js';
import {
  badge,
  button,
  callout,
  card,
  code,
  copyButton,
  deliveryStatusBadge,
  errorState,
  loadingBlock,
  pageHeader,
  testBadge,
  timeEl,
  toast,
} from '../lib/ui.js';

const REFRESH_MS = 2000;
const OUTCOME_TONES = { success: 'success', succeeded: 'success' };
const OUTCOME_LABELS = {
  success: 'Delivered',
  succeeded: 'Delivered',
  http_error: 'HTTP error',
  timeout: 'Timed out',
  network_error: 'Connection failed',
  connection_error: 'Connection failed',
};

function outcomeBadge(outcome) {
  const label = OUTCOME_LABELS[outcome] ?? String(outcome ?? 'unknown').replace(/_/g, ' ');
  return badge(label, OUTCOME_TONES[outcome] ?? 'danger', { title: outcome });
}

/** The attempt's error, unless it only repeats the status code column. */
function attemptError(a) {
  if (!a.error || (a.status_code && a.error === `HTTP ${a.status_code}`)) return null;
  return h('p', { class: 'cell-error-full', text: a.error });
}

/** A collapsed list of headers as sent or answered ("name: value" lines), or nothing when none were kept. */
function headersDetails(label, headers) {
  const names = headers ? Object.keys(headers) : [];
  if (!names.length) return null;
  return h(
    'details',
    { class: 'excerpt' },
    h('summary', { text: `${label} (${names.length})` }),
    h('pre', { class: 'code-block code-block-sm' }, h('code', { text: names.map((n) => `${n}: ${headers[n]}`).join('\n') })),
  );
}

function attemptsTable(attempts) {
  if (!attempts.length) return h('p', { class: 'muted', text: 'No attempt has been made yet.' });
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'table table-attempts' },
      h('caption', { class: 'visually-hidden', text: 'Delivery attempts, first to last' }),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['#', 'Started', 'Duration', 'Status code', 'Outcome', 'Response'].map((c) =>
            h('th', { scope: 'col', class: ['#', 'Duration'].includes(c) ? 'num' : undefined, text: c }),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        attempts.map((a) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row', class: 'num', text: String(a.attempt_number) }),
            h('td', { class: 'cell-nowrap' }, h('time', { datetime: a.started_at, text: formatDateTime(a.started_at, { seconds: true }) })),
            h('td', { class: 'num', text: formatDuration(a.duration_ms) }),
            h(
              'td',
              {},
              a.status_code
                ? h('span', { class: ['http-status', a.status_code < 300 ? 'http-ok' : 'http-bad'], text: String(a.status_code) })
                : h('span', { class: 'muted', text: '—' }),
            ),
            h('td', {}, outcomeBadge(a.outcome)),
            h(
              'td',
              { class: 'cell-response-body' },
              attemptError(a),
              a.response_body_excerpt
                ? h(
                    'details',
                    { class: 'excerpt' },
                    h('summary', { text: `Response body (${a.response_body_excerpt.length} characters shown)` }),
                    h('pre', { class: 'code-block code-block-sm' }, h('code', { text: a.response_body_excerpt })),
                  )
                : attemptError(a)
                  ? null
                  : h('span', { class: 'muted', text: 'Empty body' }),
              headersDetails('Request headers', a.request_headers),
              headersDetails('Response headers', a.response_headers),
            ),
          ),
        ),
      ),
    ),
  );
}

function abandonedNote(attempts) {
  const abandoned = attempts.filter((a) => a.outcome === 'abandoned').length;
  if (!abandoned) return undefined;
  return `${abandoned} more ${abandoned === 1 ? 'was' : 'were'} abandoned: the worker making ${abandoned === 1 ? 'it' : 'them'} stopped before recording the outcome, so the receiver may or may not have got ${abandoned === 1 ? 'it' : 'them'}.`;
}

export async function renderDelivery(view) {
  const [id] = view.params;
  let timer = null;
  let disposed = false;

  const draw = (d) => {
    view.setTitle(`${d.event_type} delivery`);
    const canRetry = d.status === 'failed' || d.status === 'dead';
    const retry = canRetry
      ? button({
          write: true,
          label: 'Retry now',
          icon: 'refresh',
          variant: 'primary',
          onClick: async () => {
            await post(`/webhooks/deliveries/${d.id}/retry`);
            toast('The delivery is queued for another attempt.');
            await load();
          },
        })
      : null;
    const payload = formatJson(
      d.event?.data !== undefined
        ? {
            id: d.event.id,
            type: d.event.type,
            created_at: d.event.created_at,
            data: d.event.data,
            ...(d.event.previous !== undefined ? { previous: d.event.previous } : {}),
            ...(d.test ? { test: true } : {}),
          }
        : d.event,
    );
    replace(
      view.root,
      pageHeader({
        title: d.event_type,
        breadcrumbs: [{ label: 'Deliveries', href: '#/deliveries' }, { label: `Delivery ${d.id.slice(0, 8)}` }],
        badges: [deliveryStatusBadge(d.status), testBadge(d)],
        description: `To ${d.endpoint_url}`,
        actions: [h('a', { class: 'btn btn-secondary', href: `#/webhooks/${d.endpoint_id}` }, 'View endpoint'), retry].filter(Boolean),
      }),
      d.status === 'dead'
        ? callout({ tone: 'danger', title: 'Dead letter', text: 'Every scheduled attempt failed. Fix the receiver, then retry the delivery.' })
        : null,
      h(
        'div',
        { class: 'detail-grid' },
        card({
          title: 'Summary',
          body: h(
            'dl',
            { class: 'meta-list' },
            h('dt', { text: 'Status' }),
            h('dd', {}, deliveryStatusBadge(d.status)),
            h('dt', { text: 'Attempts' }),
            h('dd', { text: String(d.attempt_count) }),
            (d.status === 'pending' || d.status === 'failed') && d.next_attempt_at
              ? [h('dt', { text: 'Next attempt' }), h('dd', {}, timeEl(d.next_attempt_at))]
              : null,
            h('dt', { text: 'Last status code' }),
            h('dd', { text: d.last_status_code ? String(d.last_status_code) : '—' }),
            d.last_error ? [h('dt', { text: 'Last error' }), h('dd', { class: 'cell-error-full', text: d.last_error })] : null,
            h('dt', { text: 'Endpoint' }),
            h('dd', {}, h('a', { href: `#/webhooks/${d.endpoint_id}`, class: 'endpoint-link', text: d.endpoint_url })),
            h('dt', { text: 'Delivery id' }),
            h('dd', {}, code(d.id)),
            h('dt', { text: 'Event id' }),
            h('dd', {}, code(d.event_id), h('span', { class: 'cell-sub', text: 'Sent as webhook-id; stays the same on every retry.' })),
            h('dt', { text: 'Created' }),
            h('dd', { text: formatDateTime(d.created_at, { seconds: true }) }),
            h('dt', { text: 'Updated' }),
            h('dd', { text: formatDateTime(d.updated_at, { seconds: true }) }),
          ),
        }),
        card({
          title: 'Event payload',
          description: 'The JSON body POSTed to the endpoint.',
          actions: [copyButton(() => payload, { label: 'Copy JSON' })],
          body: h('pre', { class: 'code-block payload', tabindex: '0' }, h('code', { text: payload })),
        }),
      ),
      card({
        // An abandoned attempt is one a stopped worker never recorded the end of: it is listed, not counted.
        title: `Attempts (${d.attempts.filter((a) => a.outcome !== 'abandoned').length})`,
        description: abandonedNote(d.attempts),
        body: attemptsTable(d.attempts),
        id: 'attempts-heading',
      }),
    );
  };

  const load = async () => {
    clearTimeout(timer);
    try {
      const { data } = await get(`/webhooks/deliveries/${id}`);
      if (disposed) return;
      const focused = document.activeElement?.closest?.('.page-actions') ? document.activeElement.textContent : null;
      draw(data);
      if (focused) [...view.root.querySelectorAll('.page-actions .btn')].find((b) => b.textContent === focused)?.focus();
      if (data.status === 'pending' || data.status === 'failed') {
        timer = setTimeout(() => {
          if (document.visibilityState === 'visible') load();
          else timer = setTimeout(load, REFRESH_MS);
        }, REFRESH_MS);
      }
    } catch (error) {
      if (error.status !== 401 && !disposed) {
        replace(
          view.root,
          pageHeader({ title: 'Delivery', breadcrumbs: [{ label: 'Deliveries', href: '#/deliveries' }, { label: 'Not available' }] }),
          errorState(error, load),
        );
      }
    }
  };

  replace(view.root, loadingBlock('Loading the delivery…'));
  await load();
  return () => {
    disposed = true;
    clearTimeout(timer);
  };
}
