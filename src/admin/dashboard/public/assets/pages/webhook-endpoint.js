/**
 * One webhook endpoint: its state and settings, the signing secret (reveal, copy, rotate), ping,
 * enable/disable, replaying a time range of events (lib/endpoint-replay.js), its success rate and
 * latency (lib/endpoint-stats.js), and its deliveries.
 */
import { h, replace } from '../lib/dom.js';
import { get, patch, post } from '../lib/api.js';
import { formatDateTime } from '../lib/format.js';
import { button, callout, card, code, confirmDialog, copyButton, endpointStateBadge, errorState, loadingBlock, pageHeader, timeEl, toast } from '../lib/ui.js';
import { deliveriesPanel } from '../lib/deliveries-panel.js';
import { deleteButton, testEventButton } from '../lib/endpoint-actions.js';
import { openReplayDialog } from '../lib/endpoint-replay.js';
import { endpointStats } from '../lib/endpoint-stats.js';
import { eventTypesSummary, openEndpointDialog } from './webhooks.js';

const MASK = `whsec_${'•'.repeat(24)}`;

function secretCard(endpoint, role) {
  // A viewer may not read the secret (the admin API refuses it): no Reveal, Copy or Rotate to offer.
  if (role === 'viewer') {
    return card({
      title: 'Signing secret',
      body: h(
        'div',
        {},
        h('div', { class: 'secret-display' }, h('code', { class: 'code secret-value', text: MASK })),
        h('p', { class: 'card-note', text: 'Owners and admins can reveal and copy the signing secret; your role reads everything else.' }),
      ),
    });
  }
  let secret = null;
  let previousExpiresAt = null;
  let revealed = false;
  const value = h('code', { class: 'code secret-value', text: MASK, 'aria-live': 'polite' });
  const note = h('p', { class: 'card-note' });
  const fetchSecret = async () => {
    if (!secret) {
      const { data } = await get(`/webhooks/endpoints/${endpoint.id}/secret`);
      secret = data.secret;
      previousExpiresAt = data.previous_secret_expires_at;
    }
    return secret;
  };
  const drawNote = () => {
    if (previousExpiresAt && Date.parse(previousExpiresAt) > Date.now()) {
      replace(
        note,
        'The previous secret also signs deliveries until ',
        h('time', { datetime: previousExpiresAt, text: formatDateTime(previousExpiresAt) }),
        ', so receivers can switch without missing events.',
      );
    } else {
      replace(note, 'Receivers verify the webhook-signature header with this secret (Standard Webhooks, HMAC-SHA256).');
    }
  };
  const reveal = button({
    write: true,
    label: 'Reveal',
    icon: 'eye',
    size: 'sm',
    onClick: async () => {
      if (revealed) {
        revealed = false;
        value.textContent = MASK;
      } else {
        value.textContent = await fetchSecret();
        revealed = true;
      }
      reveal.setAttribute('aria-pressed', String(revealed));
      reveal.querySelector('.btn-label').textContent = revealed ? 'Hide' : 'Reveal';
      drawNote();
    },
  });
  reveal.setAttribute('aria-pressed', 'false');
  const rotate = button({
    write: true,
    label: 'Rotate…',
    icon: 'rotate',
    size: 'sm',
    onClick: async () => {
      let rotated = null;
      const confirmed = await confirmDialog({
        title: 'Rotate the signing secret?',
        message:
          'A new secret is generated and used from now on. The current secret keeps signing too, for a while, so the receiver can be updated without missing an event.',
        confirmLabel: 'Rotate secret',
        action: async () => {
          rotated = (await post(`/webhooks/endpoints/${endpoint.id}/rotate-secret`)).data;
        },
      });
      if (!confirmed || !rotated) return;
      secret = rotated.secret;
      previousExpiresAt = rotated.previous_secret_expires_at;
      revealed = true;
      value.textContent = secret;
      reveal.setAttribute('aria-pressed', 'true');
      reveal.querySelector('.btn-label').textContent = 'Hide';
      drawNote();
      toast('A new signing secret is in use.');
    },
  });
  drawNote();
  return card({
    title: 'Signing secret',
    body: h('div', {}, h('div', { class: 'secret-display' }, value), h('div', { class: 'button-row' }, reveal, copyButton(fetchSecret), rotate), note),
  });
}

/** How often the endpoint page asks for the breaker's state. */
const ENDPOINT_POLL_MS = 2000;

export async function renderWebhookEndpoint(view) {
  const [id] = view.params;
  let panel = null;
  let stats = null;

  const draw = (endpoint) => {
    // Redrawing replaces the buttons; keep the keyboard focus on the action that was used.
    const actions = [...view.root.querySelectorAll('.page-actions .btn')];
    const focusedAction = actions.indexOf(document.activeElement);
    view.setTitle(endpoint.url);
    const enabled = endpoint.enabled !== false && endpoint.state !== 'disabled';
    const ping = button({
      write: true,
      label: 'Send ping',
      icon: 'send',
      variant: 'secondary',
      onClick: async () => {
        const { data } = await post(`/webhooks/endpoints/${endpoint.id}/ping`);
        toast('Ping queued. It appears in the deliveries below.');
        panel?.reload();
        return data;
      },
    });
    const edit = button({
      write: true,
      label: 'Edit',
      icon: 'edit',
      onClick: () => openEndpointDialog({ endpoint, onSaved: (saved) => draw(saved), navigate: view.navigate }),
    });
    const toggle = button({
      write: true,
      label: enabled ? 'Disable' : 'Enable',
      icon: 'power',
      variant: enabled ? 'danger-ghost' : 'primary',
      dataset: { action: 'toggle' },
      onClick: async () => {
        if (enabled) {
          const ok = await confirmDialog({
            title: 'Disable this endpoint?',
            message: 'No events are delivered to it while it is disabled. Enable it again at any time.',
            confirmLabel: 'Disable endpoint',
            danger: true,
            action: async () => draw((await patch(`/webhooks/endpoints/${endpoint.id}`, { enabled: false })).data),
          });
          if (ok) {
            toast('Endpoint disabled.');
            view.root.querySelector('[data-action="toggle"]')?.focus();
          }
        } else {
          draw((await patch(`/webhooks/endpoints/${endpoint.id}`, { enabled: true })).data);
          toast('Endpoint enabled.');
        }
      },
    });
    const resume =
      endpoint.state === 'paused'
        ? button({
            write: true,
            label: 'Resume now',
            icon: 'refresh',
            variant: 'primary',
            onClick: async () => {
              draw((await patch(`/webhooks/endpoints/${endpoint.id}`, { enabled: true })).data);
              toast('The circuit breaker is closed; deliveries resume.');
            },
          })
        : null;
    const replay = button({
      write: true,
      label: 'Replay…',
      icon: 'replay',
      variant: 'ghost',
      onClick: () => openReplayDialog(endpoint, () => panel?.reload()),
    });

    let stateNotice = null;
    if (endpoint.state === 'paused') {
      stateNotice = callout({
        tone: 'warning',
        title: `Paused by the circuit breaker until ${formatDateTime(endpoint.paused_until, { seconds: true })}`,
        text: `After ${endpoint.consecutive_failures} failed attempts in a row, deliveries wait (they are not failed). When the pause ends one attempt is made: success resumes delivery, failure pauses again. "Resume now" closes the breaker at once.`,
      });
    } else if (!enabled) {
      stateNotice = callout({
        tone: 'neutral',
        title: 'Disabled',
        text: endpoint.disabled_reason ? `Reason: ${endpoint.disabled_reason}` : 'No events are delivered to this endpoint.',
      });
    }

    const header = pageHeader({
      title: endpoint.url,
      description: endpoint.description || undefined,
      breadcrumbs: [{ label: 'Webhooks', href: '#/webhooks' }, { label: 'Endpoint' }],
      badges: [endpointStateBadge(endpoint)],
      actions: [
        replay,
        edit,
        toggle,
        resume,
        ping,
        enabled ? testEventButton(endpoint, { onSent: () => panel?.reload() }) : null,
        deleteButton(endpoint, { onDeleted: () => view.navigate('#/webhooks') }),
      ].filter(Boolean),
    });
    header.querySelector('h1')?.classList.add('page-title-url');
    const details = card({
      title: 'Settings',
      body: h(
        'dl',
        { class: 'meta-list' },
        h('dt', { text: 'URL' }),
        h('dd', {}, code(endpoint.url)),
        h('dt', { text: 'Events' }),
        h('dd', {}, eventTypesSummary(endpoint.event_types)),
        h('dt', { text: 'Description' }),
        h('dd', { text: endpoint.description || '—' }),
        h('dt', { text: 'Failure streak' }),
        h('dd', { text: `${endpoint.consecutive_failures ?? 0} consecutive failed attempts` }),
        h('dt', { text: 'Created' }),
        h('dd', {}, timeEl(endpoint.created_at)),
        h('dt', { text: 'Updated' }),
        h('dd', {}, timeEl(endpoint.updated_at)),
      ),
    });
    const existingPanel = panel;
    if (!existingPanel) panel = deliveriesPanel({ endpointId: endpoint.id });
    if (stats) stats.refresh();
    else stats = endpointStats(endpoint.id);
    replace(
      view.root,
      header,
      stateNotice,
      h('div', { class: 'detail-grid' }, details, secretCard(endpoint, view.session.role)),
      stats.element,
      card({ title: 'Deliveries', description: 'Newest first. Failed deliveries are retried automatically; dead letters wait for you.', body: panel.element }),
    );
    if (focusedAction >= 0) view.root.querySelectorAll('.page-actions .btn')[focusedAction]?.focus();
  };

  replace(view.root, loadingBlock('Loading the endpoint…'));
  let shown = null;
  const drawn = (endpoint) => {
    shown = endpoint;
    draw(endpoint);
  };
  try {
    const { data } = await get(`/webhooks/endpoints/${id}`);
    drawn(data);
  } catch (error) {
    if (error.status !== 401)
      replace(
        view.root,
        pageHeader({ title: 'Webhook endpoint', breadcrumbs: [{ label: 'Webhooks', href: '#/webhooks' }, { label: 'Not available' }] }),
        errorState(error, () => renderWebhookEndpoint(view)),
      );
    return undefined;
  }

  // Follow the circuit breaker live: the page shows a pause (or its end, or a disable by a 410)
  // without a reload. Redrawn only when the state changed, and not under an open dialog.
  let timer;
  let stopped = false;
  const stateKey = (e) => JSON.stringify([e.state, e.enabled, e.paused_until, e.consecutive_failures, e.disabled_reason]);
  const poll = () => {
    timer = setTimeout(async () => {
      if (stopped) return;
      if (document.visibilityState === 'visible' && !document.querySelector('dialog[open]')) {
        try {
          const { data } = await get(`/webhooks/endpoints/${id}`);
          if (!stopped && shown && stateKey(data) !== stateKey(shown)) drawn(data);
        } catch (error) {
          if (error.status === 401 || error.status === 404) return;
        }
      }
      if (!stopped) poll();
    }, ENDPOINT_POLL_MS);
  };
  poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
    panel?.cleanup();
    stats?.cleanup();
  };
}
