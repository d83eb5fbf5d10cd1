/** Overview: store counts, webhook deliveries of the last 24 hours, endpoints needing attention. */
import { h, icon, replace } from '../lib/dom.js';
import { get, listAll } from '../lib/api.js';
import { formatDateTime, formatNumber } from '../lib/format.js';
import { card, emptyState, endpointStateBadge, errorState, loadingBlock, pageHeader } from '../lib/ui.js';
import { CHART_SERIES, deliveryChart, deliveryTable, hourlySlots, seriesTotals } from '../lib/chart.js';
import { alertsBlock, refreshAlerts } from '../lib/alerts.js';

function statCard({ label, value, detail, href, iconName }) {
  const body = [
    h('div', { class: 'stat-top' }, h('span', { class: 'stat-label', text: label }), h('span', { class: 'stat-icon' }, icon(iconName))),
    h('p', { class: 'stat-value', text: formatNumber(value) }),
    detail ? h('p', { class: 'stat-detail', text: detail }) : null,
  ];
  return href ? h('a', { class: 'stat-card stat-card-link', href }, body) : h('div', { class: 'stat-card' }, body);
}

async function loadCounts(slot) {
  replace(slot, loadingBlock('Loading counts…'));
  try {
    const { data } = await get('/overview');
    replace(
      slot,
      h(
        'div',
        { class: 'stat-grid' },
        statCard({
          label: 'Products',
          value: data.products.active,
          detail: `${formatNumber(data.products.total)} in total, ${formatNumber(data.products.total - data.products.active)} inactive`,
          iconName: 'overview',
        }),
        statCard({ label: 'Orders', value: data.orders.total, detail: `${formatNumber(data.orders.last_24h)} in the last 24 hours`, iconName: 'deliveries' }),
        statCard({ label: 'Customers', value: data.customers.total, detail: `${formatNumber(data.customers.active)} active`, iconName: 'inbox' }),
        statCard({ label: 'Active API keys', value: data.api_tokens.active, detail: 'Manage keys →', href: '#/api-keys', iconName: 'key' }),
      ),
    );
  } catch (error) {
    replace(
      slot,
      errorState(error, () => loadCounts(slot)),
    );
  }
}

const DAY_MS = 86_400_000;
const days = (ms) => {
  if (ms % DAY_MS === 0) return `${ms / DAY_MS} day${ms === DAY_MS ? '' : 's'}`;
  return ms >= 3_600_000 ? `${Math.round(ms / 3_600_000)} hours` : `${Math.round(ms / 1000)} seconds`;
};

/** How far back delivery history goes (retention): succeeded deliveries and dead letters are pruned after their time. */
function retentionNote(retention) {
  if (!retention) return null;
  const since = retention.oldest_delivery_at ? `History goes back to ${formatDateTime(retention.oldest_delivery_at)}. ` : '';
  return h('p', {
    class: 'muted small',
    dataset: { retention: '' },
    text: `${since}Succeeded deliveries are kept ${days(retention.delivery_retention_ms)}, dead letters ${days(retention.dead_letter_retention_ms)} unless retried, events ${days(retention.event_retention_ms)}.`,
  });
}

async function loadDeliveries(slot) {
  replace(slot, loadingBlock('Loading delivery statistics…'));
  try {
    const { data } = await get('/webhooks/stats?hours=24');
    const slots = hourlySlots(data.buckets, 24);
    const sums = seriesTotals(slots);
    const now = data.totals ?? {};
    const legend = h(
      'ul',
      { class: 'chart-legend', 'aria-label': 'Last 24 hours' },
      CHART_SERIES.map((s) =>
        h(
          'li',
          {},
          h('span', { class: ['legend-swatch', s.className], 'aria-hidden': 'true' }),
          h('span', { class: 'legend-label', text: s.label }),
          h('strong', { class: 'legend-value', dataset: { series: s.key }, text: formatNumber(sums[s.key]) }),
        ),
      ),
    );
    const nothing = slots.every((s) => s.succeeded + s.failed + s.dead === 0);
    const waiting = h(
      'p',
      { class: 'chart-now' },
      h('span', { class: 'chart-now-label', text: 'Now' }),
      h('span', {}, h('strong', { dataset: { now: 'pending' }, text: formatNumber(now.pending ?? 0) }), ' pending'),
      h('span', {}, h('strong', { dataset: { now: 'failed' }, text: formatNumber(now.failed ?? 0) }), ' waiting for a retry'),
      (now.dead ?? 0) > 0
        ? h(
            'a',
            { href: '#/deliveries?status=dead' },
            h('strong', { dataset: { now: 'dead' }, text: formatNumber(now.dead) }),
            ` dead letter${now.dead === 1 ? '' : 's'} →`,
          )
        : h('span', {}, h('strong', { dataset: { now: 'dead' }, text: '0' }), ' dead letters'),
    );
    replace(
      slot,
      legend,
      nothing ? h('p', { class: 'chart-empty', text: 'No deliveries in the last 24 hours.' }) : null,
      h('div', { class: 'chart-wrap' }, deliveryChart(slots)),
      waiting,
      h('details', { class: 'chart-details' }, h('summary', { text: 'Show the numbers per hour' }), deliveryTable(slots)),
      retentionNote(data.retention),
    );
  } catch (error) {
    replace(
      slot,
      errorState(error, () => loadDeliveries(slot)),
    );
  }
}

async function loadEndpoints(slot) {
  replace(slot, loadingBlock('Loading endpoints…'));
  try {
    const data = await listAll('/webhooks/endpoints');
    if (data.length === 0) {
      replace(
        slot,
        emptyState({
          iconName: 'webhook',
          title: 'No webhook endpoints',
          text: 'Register an endpoint to receive store events.',
          action: h('a', { class: 'btn btn-primary btn-sm', href: '#/webhooks' }, 'Add an endpoint'),
        }),
      );
      return;
    }
    const needing = data.filter((e) => e.state !== 'active');
    const shown = (needing.length ? needing : data).slice(0, 5);
    replace(
      slot,
      h('p', {
        class: 'muted small',
        text: needing.length
          ? `${needing.length} of ${data.length} endpoints need attention.`
          : `All ${data.length} endpoint${data.length === 1 ? ' is' : 's are'} active.`,
      }),
      h(
        'ul',
        { class: 'endpoint-mini-list' },
        shown.map((e) =>
          h(
            'li',
            {},
            h('a', { href: `#/webhooks/${e.id}`, class: 'endpoint-mini-url', text: e.url }),
            h('span', { class: 'endpoint-mini-state' }, endpointStateBadge(e), e.description ? h('span', { text: e.description }) : null),
          ),
        ),
      ),
    );
  } catch (error) {
    replace(
      slot,
      errorState(error, () => loadEndpoints(slot)),
    );
  }
}

async function loadAlerts(slot) {
  const alerts = await refreshAlerts();
  if (!alerts) return;
  const draw = (data) => data && replace(slot, alertsBlock(data, { onSeen: draw }));
  draw(alerts);
}

export async function renderOverview(view) {
  const alerts = h('div', { class: 'alerts-slot', dataset: { alerts: 'overview' } });
  const counts = h('div');
  const deliveries = h('div');
  const endpoints = h('div');
  replace(
    view.root,
    pageHeader({ title: 'Overview', description: 'The store at a glance and how its integrations are doing.' }),
    alerts,
    counts,
    h(
      'div',
      { class: 'overview-grid' },
      card({
        title: 'Webhook deliveries',
        description: 'Last 24 hours, by outcome',
        body: deliveries,
        className: 'span-2',
        actions: [h('a', { class: 'btn btn-ghost btn-sm', href: '#/deliveries' }, 'All deliveries')],
      }),
      card({ title: 'Webhook endpoints', body: endpoints, actions: [h('a', { class: 'btn btn-ghost btn-sm', href: '#/webhooks' }, 'Manage')] }),
    ),
  );
  await Promise.all([loadAlerts(alerts), loadCounts(counts), loadDeliveries(deliveries), loadEndpoints(endpoints)]);
}
