/**
 * Alerts (GET /alerts, POST /alerts/seen): endpoints paused by the circuit breaker or disabled, and
 * dead letters that appeared since this administrator last looked. The navigation carries a marker
 * on "Overview" while anything needs attention (refreshed on every page change and every 15 s while
 * the tab is visible); the overview lists the alerts and marks them seen when asked. Every role sees
 * them, and marking them seen changes only what this administrator has seen.
 */
import { h, icon } from './dom.js';
import { get, post } from './api.js';
import { formatNumber } from './format.js';
import { button, callout, endpointStateBadge } from './ui.js';

const REFRESH_MS = 15_000;
let navMarker = null;
let navDescription = null;
let timer = null;

/** How many things need attention: each paused or disabled endpoint, and new dead letters (one). */
export function alertCount(alerts) {
  return alerts.endpoints.length + (alerts.dead_letters.since_seen > 0 ? 1 : 0);
}

function drawNav(alerts) {
  if (!navMarker?.isConnected) return;
  const n = alertCount(alerts);
  navMarker.hidden = n === 0;
  navMarker.textContent = formatNumber(n);
  navDescription.textContent = n === 0 ? '' : `${n} ${n === 1 ? 'alert needs' : 'alerts need'} attention`;
}

/** Reads the alerts and redraws the navigation's marker; answers them (null when unavailable). */
export async function refreshAlerts() {
  try {
    const { data } = await get('/alerts');
    drawNav(data);
    return data;
  } catch {
    return null;
  }
}

/**
 * The marker for the navigation link (a count, hidden until there are alerts) and, for screen
 * readers, the link's description in words (outside the link, so its name stays "Overview");
 * refreshed from now on.
 */
export function navAlertMarker() {
  navMarker = h('span', { class: 'nav-alert', dataset: { alerts: '' }, 'aria-hidden': 'true', hidden: true });
  navDescription = h('span', { id: 'nav-alerts-description', class: 'visually-hidden' });
  clearInterval(timer);
  timer = setInterval(() => {
    if (document.visibilityState === 'visible' && navMarker?.isConnected) refreshAlerts();
  }, REFRESH_MS);
  return { marker: navMarker, description: navDescription };
}

/** The overview's alerts block: what needs attention, or a line saying nothing does. */
export function alertsBlock(alerts, { onSeen }) {
  if (!alerts.attention) {
    return callout({
      tone: 'success',
      title: 'Nothing needs attention',
      text:
        alerts.dead_letters.total > 0
          ? `Every endpoint is active and no dead letter arrived since you last looked (${formatNumber(alerts.dead_letters.total)} older ones wait in the deliveries).`
          : 'Every endpoint is active and there are no dead letters.',
    });
  }
  const items = alerts.endpoints.map((e) =>
    h(
      'li',
      { dataset: { alertEndpoint: e.id } },
      h('a', { href: `#/webhooks/${e.id}`, class: 'endpoint-mini-url', text: e.url }),
      h(
        'span',
        { class: 'endpoint-mini-state' },
        endpointStateBadge({ ...e, enabled: e.state !== 'disabled' }),
        e.disabled_reason ? h('span', { text: e.disabled_reason }) : null,
      ),
    ),
  );
  // Admin keys acting as viewers: their maker has no second factor an owner requires.
  for (const key of alerts.keys_without_second_factor ?? []) {
    items.push(
      h(
        'li',
        { dataset: { alertKey: key.id } },
        h('a', { href: '#/api-keys', text: `API key ${key.name} (${key.prefix}…)` }),
        h('span', {
          class: 'muted small',
          text: `acts as a viewer: ${key.maker_email ?? 'its maker'} has not set up the second factor this store requires`,
        }),
      ),
    );
  }
  const dead = alerts.dead_letters.since_seen;
  if (dead > 0) {
    items.push(
      h(
        'li',
        { dataset: { alertDeadLetters: String(dead) } },
        h('a', {
          href: '#/deliveries?status=dead',
          text: `${formatNumber(dead)} new dead letter${dead === 1 ? '' : 's'} since you last looked`,
        }),
        h('span', { class: 'muted small', text: `${formatNumber(alerts.dead_letters.total)} dead in total, waiting for a retry` }),
      ),
    );
  }
  const seen =
    dead > 0
      ? button({
          label: 'Mark dead letters as seen',
          icon: 'check',
          size: 'sm',
          dataset: { action: 'alerts-seen' },
          onClick: async () => {
            await post('/alerts/seen');
            onSeen(await refreshAlerts());
          },
        })
      : null;
  return h(
    'section',
    { class: 'callout callout-warning alerts-block', 'aria-labelledby': 'alerts-title' },
    icon('alert'),
    h(
      'div',
      {},
      h('h2', { class: 'callout-title', id: 'alerts-title', text: 'Needs attention' }),
      h('ul', { class: 'endpoint-mini-list alerts-list' }, items),
      seen,
    ),
  );
}
