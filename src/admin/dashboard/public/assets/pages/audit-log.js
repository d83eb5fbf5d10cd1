/**
 * Settings → Audit log: who did what, when and from where, newest first; filtered by who, what and
 * a date range (kept in the address, so a filtered view can be shared), paged with "Load more".
 */
import { h, replace } from '../lib/dom.js';
import { get, query } from '../lib/api.js';
import { button, card, code, emptyState, errorState, field, loadingBlock, pageHeader, timeEl } from '../lib/ui.js';
import { formatDateTime, formatNumber } from '../lib/format.js';

/** The actions of the admin API's filter, in words. */
export const ACTION_LABELS = {
  'session.signed_in': 'Signed in',
  'session.sign_in_failed': 'Sign-in failed',
  'session.signed_out': 'Signed out',
  'session.store_switched': 'Switched store',
  'session.ended': 'Session ended',
  'session.others_ended': 'Other sessions ended',
  'session.sso_refused': 'Single sign-on refused',
  'setup.completed': 'First administrator created',
  'admin.invited': 'Administrator invited',
  'admin.invitation_revoked': 'Invitation withdrawn',
  'admin.joined': 'Invitation accepted',
  'admin.role_changed': 'Role changed',
  'admin.removed': 'Administrator removed',
  'admin.sessions_ended': 'Sessions of an administrator ended',
  'admin.password_changed': 'Password changed',
  'admin.password_reset_issued': 'Password-reset link issued',
  'admin.password_reset': 'Password reset',
  'admin.second_factor_enrolled': 'Two-factor turned on',
  'admin.second_factor_removed': 'Two-factor turned off',
  'admin.recovery_code_used': 'Recovery code used',
  'admin.recovery_codes_regenerated': 'New recovery codes',
  'admin.second_factor_failed': 'Two-factor code refused',
  'admin.passkey_added': 'Passkey added',
  'admin.passkey_renamed': 'Passkey renamed',
  'admin.passkey_removed': 'Passkey removed',
  'admin.passkey_refused': 'Passkey refused',
  'admin.reauthenticated': 'Identity confirmed',
  'admin.reauthentication_failed': 'Identity confirmation failed',
  'settings.second_factor_requirement_changed': 'Two-factor requirement changed',
  'settings.sso_changed': 'Single sign-on changed',
  'settings.sso_removed': 'Single sign-on turned off',
  'key.created': 'API key created',
  'key.rolled': 'API key rolled',
  'key.revoked': 'API key revoked',
  'key.updated': 'API key changed',
  'key.transferred': 'API keys transferred',
  'endpoint.created': 'Endpoint created',
  'endpoint.updated': 'Endpoint changed',
  'endpoint.enabled': 'Endpoint enabled',
  'endpoint.disabled': 'Endpoint disabled',
  'endpoint.deleted': 'Endpoint deleted',
  'endpoint.secret_rotated': 'Signing secret rotated',
  'endpoint.pinged': 'Ping sent',
  'endpoint.test_event_sent': 'Test event sent',
  'endpoint.replayed': 'Events replayed',
  'deliveries.retried': 'Deliveries retried',
  'store.written': 'Store data changed',
};

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d/;
const UNITS = [
  [86_400, 'day'],
  [3_600, 'hour'],
  [60, 'minute'],
  [1, 'second'],
];

/** "1 hour", "3 days", "90 seconds": a whole number of the largest unit that fits exactly. */
function secondsWords(seconds) {
  const [size, unit] = UNITS.find(([size]) => seconds % size === 0 && seconds >= size) ?? [1, 'second'];
  const n = seconds / size;
  return `${formatNumber(n)} ${unit}${n === 1 ? '' : 's'}`;
}

/** A details key in words: `overlap_seconds` → "Overlap", `failed_only` → "Failed only". */
function keyWords(key) {
  const words = key.replace(/_seconds$/, '').replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** A details value as a person reads it: times in local time, yes/no, lists, durations, numbers. */
function valueWords(key, v) {
  if (v === null || v === undefined || v === '') return '—';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'number') return key.endsWith('_seconds') ? secondsWords(v) : formatNumber(v);
  if (typeof v === 'string') return ISO_TIME.test(v) ? formatDateTime(v, { seconds: true }) : v;
  if (Array.isArray(v)) return v.length === 0 ? 'none' : v.map((item) => valueWords(key, item)).join(', ');
  return Object.entries(v)
    .map(([k, item]) => `${keyWords(k).toLowerCase()} ${valueWords(k, item)}`)
    .join(', ');
}

/** The details of an entry as short "Key: value" lines in words (changes as "from → to"). */
function detailLines(details) {
  const lines = [];
  for (const [key, value] of Object.entries(details ?? {})) {
    if (key === 'changes' && value && typeof value === 'object') {
      for (const [k, c] of Object.entries(value)) lines.push(`${keyWords(k)}: ${valueWords(k, c?.from)} → ${valueWords(k, c?.to)}`);
    } else if (value && typeof value === 'object' && 'from' in value && 'to' in value) {
      lines.push(`${keyWords(key)}: ${valueWords(key, value.from)} → ${valueWords(key, value.to)}`);
    } else {
      lines.push(`${keyWords(key)}: ${valueWords(key, value)}`);
    }
  }
  return lines;
}

const dayStart = (date) => (date ? new Date(`${date}T00:00:00`).toISOString() : undefined);
const dayAfter = (date) => (date ? new Date(new Date(`${date}T00:00:00`).getTime() + 86_400_000).toISOString() : undefined);

export async function renderAuditLog(view) {
  const q = view.query;
  const actor = h('input', { type: 'search', name: 'actor', value: q.get('actor') ?? '', placeholder: 'email or key name', autocomplete: 'off' });
  const action = h(
    'select',
    { name: 'action', value: q.get('action') ?? '' },
    h('option', { value: '', text: 'All actions' }),
    Object.entries(ACTION_LABELS).map(([value, label]) => h('option', { value, text: label })),
  );
  const from = h('input', { type: 'date', name: 'from', value: q.get('from') ?? '' });
  const to = h('input', { type: 'date', name: 'to', value: q.get('to') ?? '' });
  const apply = h('button', { type: 'submit', class: 'btn btn-secondary' }, h('span', { class: 'btn-label', text: 'Filter' }));
  const filters = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Filter the audit log' },
    field({ label: 'Who', control: actor }),
    field({ label: 'Action', control: action }),
    field({ label: 'From', control: from }),
    field({ label: 'To (inclusive)', control: to }),
    apply,
  );
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    view.navigate(`#/audit-log${query({ actor: actor.value.trim(), action: action.value, from: from.value, to: to.value })}`);
  });

  const body = h('div');
  const rows = [];
  let cursor = null;
  const load = async ({ append = false } = {}) => {
    try {
      const page = await get(
        `/audit-log${query({ limit: 50, actor: q.get('actor'), action: q.get('action'), from: dayStart(q.get('from')), to: dayAfter(q.get('to')), cursor: append ? cursor : null })}`,
      );
      if (!append) rows.length = 0;
      rows.push(...page.data);
      cursor = page.pagination.next_cursor;
      if (rows.length === 0) {
        replace(
          body,
          emptyState({
            iconName: 'list',
            title: 'Nothing recorded',
            text: q.toString() ? 'No entry matches these filters.' : 'Administrative actions appear here as they happen.',
          }),
        );
        return;
      }
      replace(
        body,
        h(
          'div',
          { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Audit log entries (scrolls sideways on narrow screens)' },
          h(
            'table',
            { class: 'table', id: 'audit-table' },
            h('caption', { class: 'visually-hidden', text: 'Audit log, newest first' }),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['When', 'Who', 'Action', 'Target', 'From', 'What changed'].map((c) => h('th', { scope: 'col', text: c })),
              ),
            ),
            h(
              'tbody',
              {},
              rows.map((e) =>
                h(
                  'tr',
                  { dataset: { action: e.action } },
                  h('td', {}, timeEl(e.at, { absolute: true })),
                  h('td', { class: 'cell-strong' }, e.actor.name, e.actor.kind === 'token' ? h('span', { class: 'muted', text: ' (API key)' }) : null),
                  h('td', { text: ACTION_LABELS[e.action] ?? e.action }),
                  h(
                    'td',
                    {},
                    e.target
                      ? [e.target.type, ' ', e.target.id ? code(e.target.id.slice(0, 8), 'code-subtle') : null]
                      : h('span', { class: 'muted', text: '—' }),
                  ),
                  h('td', {}, e.client_ip ? code(e.client_ip, 'code-subtle') : h('span', { class: 'muted', text: '—' })),
                  h(
                    'td',
                    { class: 'audit-details' },
                    detailLines(e.details).map((line) => h('div', { text: line })),
                  ),
                ),
              ),
            ),
          ),
        ),
        page.pagination.has_more ? h('div', { class: 'load-more' }, button({ label: 'Load more', size: 'sm', onClick: () => load({ append: true }) })) : null,
        h('p', {
          class: 'muted',
          text: `${rows.length} ${rows.length === 1 ? 'entry' : 'entries'} shown${page.pagination.has_more ? '; more are older' : ''}.`,
        }),
      );
    } catch (error) {
      if (error.status !== 401)
        replace(
          body,
          errorState(error, () => load()),
        );
    }
  };
  replace(
    view.root,
    pageHeader({
      title: 'Audit log',
      description: 'Every administrative action: who, when, from which address and what changed. Secrets are never recorded.',
      breadcrumbs: [{ label: 'Settings' }, { label: 'Audit log' }],
    }),
    card({ body: h('div', {}, filters, body) }),
  );
  replace(body, loadingBlock('Loading the audit log…'));
  await load();
}
