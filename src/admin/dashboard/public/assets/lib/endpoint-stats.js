/**
 * The endpoint page's delivery health: success rate and latency (p50, p95) of its attempts over
 * the last 24 hours and 7 days (GET …/stats; how they are counted: decision 0021). Asked again
 * when the page redraws (the breaker's state changed) and every 30 seconds while the tab is visible.
 */
import { h, replace } from './dom.js';
import { get } from './api.js';
import { formatNumber } from './format.js';
import { card } from './ui.js';

const REFRESH_MS = 30_000;

function percent(rate) {
  if (rate === null) return '—';
  const p = rate * 100;
  return `${p === 100 || p === 0 ? p.toFixed(0) : p >= 99.95 ? '99.9' : p.toFixed(1)}%`;
}

function ms(value) {
  if (value === null) return '—';
  return value >= 10_000 ? `${formatNumber(Math.round(value / 1000))} s` : `${formatNumber(value)} ms`;
}

function windowRows(label, w) {
  const attempts = `${formatNumber(w.attempts)} ${w.attempts === 1 ? 'attempt' : 'attempts'}`;
  return h(
    'tr',
    {},
    h('th', { scope: 'row', text: label }),
    h(
      'td',
      { class: 'num', dataset: { stat: 'success-rate' } },
      h('span', { class: 'stat-number', text: percent(w.success_rate) }),
      h('span', { class: 'cell-sub', text: attempts }),
    ),
    h('td', { class: 'num', dataset: { stat: 'p50' }, text: ms(w.latency_p50_ms) }),
    h('td', { class: 'num', dataset: { stat: 'p95' }, text: ms(w.latency_p95_ms) }),
  );
}

/** endpointStats(endpointId) → { element, refresh(), cleanup() }. */
export function endpointStats(endpointId) {
  const body = h('div', { class: 'endpoint-stats', 'aria-busy': 'true' }, h('p', { class: 'muted', text: 'Loading…' }));
  let timer = null;
  let stopped = false;

  async function refresh() {
    clearTimeout(timer);
    if (stopped) return;
    try {
      const { data } = await get(`/webhooks/endpoints/${endpointId}/stats`);
      if (stopped) return;
      replace(
        body,
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'table table-stats' },
            h('caption', { class: 'visually-hidden', text: 'Success rate and latency of the attempts to this endpoint' }),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', { scope: 'col', text: 'Window' }),
                h('th', { scope: 'col', class: 'num', text: 'Success rate' }),
                h('th', { scope: 'col', class: 'num', text: 'Latency p50' }),
                h('th', { scope: 'col', class: 'num', text: 'Latency p95' }),
              ),
            ),
            h('tbody', {}, windowRows('Last 24 hours', data.last_24h), windowRows('Last 7 days', data.last_7d)),
          ),
        ),
      );
      body.setAttribute('aria-busy', 'false');
    } catch (error) {
      if (error.status === 401 || stopped) return;
      replace(body, h('p', { class: 'muted', text: `Statistics are not available right now (${error.message}).` }));
      body.setAttribute('aria-busy', 'false');
    }
    timer = setTimeout(() => {
      if (document.visibilityState === 'visible') refresh();
      else timer = setTimeout(refresh, REFRESH_MS);
    }, REFRESH_MS);
  }

  const element = card({
    title: 'Delivery health',
    description: 'Attempts to this endpoint: the share that succeeded, and how long those that got an answer took.',
    body,
    className: 'endpoint-stats-card',
  });
  refresh();
  return {
    element,
    refresh,
    cleanup: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
