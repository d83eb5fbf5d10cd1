/**
 * Integrations → API keys: the tokens integrations use on /api/v1. Create (the secret is shown
 * once, with a copy button), list (revoked and expired keys hidden unless asked for), roll (a new
 * secret; the old one keeps working for the overlap picked), rename and set rate limits, revoke
 * with confirmation. Each key shows who made it (decision 0026: a key acts with its maker's role
 * now); owners transfer a maker's keys to another administrator, or revoke them all, in one step
 * ("Keys by maker"). The page holds the list: search, pages, the table and the empty states; the
 * dialogs are in lib/api-key-dialogs.js, the secret shown once in lib/api-key-secret.js, the
 * makers in lib/api-key-makers.js.
 */
import { h, replace } from '../lib/dom.js';
import { get } from '../lib/api.js';
import { formatDateTime } from '../lib/format.js';
import { button, code, emptyState, errorState, field, loadingBlock, pageHeader, timeEl, tokenStatusBadge, card } from '../lib/ui.js';
import { openCreateDialog, openEditDialog, openRollDialog, revokeKey } from '../lib/api-key-dialogs.js';
import { makerLine, makersTable } from '../lib/api-key-makers.js';
import { scopeChips } from '../lib/api-key-secret.js';

function limitsText(t) {
  const parts = [];
  if (t.rate_limit_standard) parts.push(`${t.rate_limit_standard}/window`);
  if (t.rate_limit_export) parts.push(`exports ${t.rate_limit_export}/window`);
  return parts.length ? parts.join(', ') : 'Default';
}

/** Keys per page of the table. */
const PAGE_SIZE = 50;

function tokenRows(tokens, reload) {
  return tokens.map((t) =>
    h(
      'tr',
      { dataset: { tokenId: t.id } },
      h(
        'th',
        { scope: 'row', class: 'cell-strong' },
        t.name,
        // Who made it, under its name: a column of its own would not fit 1280 px with the rest.
        h('span', { class: 'cell-sub cell-maker' }, makerLine(t.made_by)),
        t.previous_secret_expires_at ? h('span', { class: 'cell-sub', text: `Old secret works until ${formatDateTime(t.previous_secret_expires_at)}` }) : null,
      ),
      h('td', { class: 'cell-key' }, code(`${t.prefix}…`)),
      // Its rate limits under its access (what the key may do, and how fast): a column of their own
      // made the table wider than its box at 1280 px.
      h('td', {}, scopeChips(t.scopes), h('span', { class: 'cell-sub cell-limits', text: `Rate limits: ${limitsText(t)}` })),
      h('td', {}, timeEl(t.created_at)),
      h('td', {}, t.last_used_at ? timeEl(t.last_used_at) : h('span', { class: 'muted', text: 'Never' })),
      h(
        'td',
        {},
        t.expires_at
          ? h('time', { datetime: t.expires_at, title: formatDateTime(t.expires_at, { seconds: true }) }, formatDateTime(t.expires_at))
          : h('span', { class: 'muted', text: 'Never' }),
      ),
      h('td', {}, tokenStatusBadge(t.status)),
      h(
        'td',
        { class: 'cell-actions' },
        t.status === 'active'
          ? h(
              'div',
              // Edit and Roll on one line, Revoke under them: three buttons side by side made the
              // table wider than its box at 1280 px, Revoke off screen.
              { class: 'row-actions' },
              button({
                write: true,
                label: 'Edit',
                variant: 'ghost',
                size: 'sm',
                ariaLabel: `Edit API key ${t.name}`,
                onClick: () => openEditDialog(t, reload),
              }),
              button({
                write: true,
                label: 'Roll',
                variant: 'ghost',
                size: 'sm',
                ariaLabel: `Roll API key ${t.name}`,
                onClick: () => openRollDialog(t, reload),
              }),
              button({
                write: true,
                label: 'Revoke',
                variant: 'danger-ghost',
                size: 'sm',
                ariaLabel: `Revoke API key ${t.name}`,
                dataset: { action: 'revoke' },
                onClick: () => revokeKey(t, reload),
              }),
            )
          : null,
      ),
    ),
  );
}

export async function renderApiKeys(view) {
  const body = h('div');
  const isOwner = view.session?.role === 'owner';
  const makersBody = h('div');
  const showAll = view.query.get('show') === 'all';
  const toggle = h('a', { class: 'btn btn-ghost btn-sm', href: showAll ? '#/api-keys' : '#/api-keys?show=all' });
  // A store with hundreds of keys: a search by name or key prefix and pages of PAGE_SIZE, kept
  // across reloads (a revoke or a roll redraws the page the admin is on).
  let keys = [];
  let page = 0;
  const search = h('input', { type: 'search', name: 'search', autocomplete: 'off', placeholder: 'Name or key prefix' });
  const tableArea = h('div');
  const drawKeys = () => {
    const words = search.value.trim().toLowerCase();
    const shown = words ? keys.filter((t) => t.name.toLowerCase().includes(words) || t.prefix.toLowerCase().includes(words)) : keys;
    const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
    page = Math.min(page, pages - 1);
    const slice = shown.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
    const active = keys.filter((t) => t.status === 'active').length;
    const turn = (to) => {
      const label = to > page ? 'Next' : 'Previous';
      page = to;
      drawKeys();
      // The pager was redrawn: keep the focus on the button used, or the other one at an end.
      const buttons = [...tableArea.querySelectorAll('.pager button')];
      (buttons.find((b) => !b.disabled && b.textContent.trim() === label) ?? buttons.find((b) => !b.disabled))?.focus();
    };
    replace(
      tableArea,
      shown.length === 0
        ? h('p', { class: 'empty-inline', text: `No key matches “${search.value.trim()}”.` })
        : h(
            'div',
            { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'API keys (scrolls sideways on narrow screens)' },
            h(
              'table',
              { class: 'table table-keys', id: 'api-keys-table' },
              h('caption', { class: 'visually-hidden', text: `API keys: ${active} active of ${keys.length}` }),
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ['Name', 'Key', 'Access', 'Created', 'Last used', 'Expires', 'Status'].map((c) => h('th', { scope: 'col', text: c })),
                  h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Actions' })),
                ),
              ),
              h('tbody', {}, tokenRows(slice, reload)),
            ),
          ),
      shown.length > PAGE_SIZE
        ? h(
            'nav',
            { class: 'pager', 'aria-label': 'API key pages' },
            h('span', {
              class: 'pager-status',
              dataset: { role: 'key-range' },
              text: `${page * PAGE_SIZE + 1}–${page * PAGE_SIZE + slice.length} of ${shown.length}`,
            }),
            button({ label: 'Previous', size: 'sm', variant: 'secondary', disabled: page === 0, onClick: () => turn(page - 1) }),
            button({ label: 'Next', size: 'sm', variant: 'secondary', disabled: page >= pages - 1, onClick: () => turn(page + 1) }),
          )
        : null,
    );
  };
  search.addEventListener('input', () => {
    page = 0;
    drawKeys();
  });
  const searchBar = h('div', { class: 'keys-toolbar' }, field({ label: 'Search keys', control: search }));
  const reload = async () => {
    try {
      const { data: all } = await get('/tokens');
      if (isOwner) replace(makersBody, makersTable(all, (await get('/admins')).data, reload));
      const hidden = all.filter((t) => t.status !== 'active').length;
      replace(toggle, h('span', { class: 'btn-label', text: showAll ? 'Hide revoked and expired' : `Show revoked and expired (${hidden})` }));
      toggle.hidden = hidden === 0 && !showAll;
      const data = showAll ? all : all.filter((t) => t.status === 'active');
      if (data.length === 0 && all.length > 0) {
        replace(
          body,
          emptyState({
            iconName: 'key',
            title: 'No active API keys',
            text: `${hidden} revoked or expired ${hidden === 1 ? 'key is' : 'keys are'} hidden.`,
            action: button({ write: true, label: 'Create API key', icon: 'plus', variant: 'primary', onClick: () => openCreateDialog(reload) }),
          }),
        );
        return;
      }
      if (data.length === 0) {
        replace(
          body,
          emptyState({
            iconName: 'key',
            title: 'No API keys yet',
            text: 'Create a key for each system that reads the store, so each can be revoked on its own.',
            action: button({ write: true, label: 'Create API key', icon: 'plus', variant: 'primary', onClick: () => openCreateDialog(reload) }),
          }),
        );
        return;
      }
      keys = data;
      if (!tableArea.isConnected) replace(body, searchBar, tableArea);
      drawKeys();
    } catch (error) {
      if (error.status !== 401) replace(body, errorState(error, reload));
    }
  };
  replace(
    view.root,
    pageHeader({
      title: 'API keys',
      description: 'Keys let integrations read products, orders, customers and inventory through the API. Each is shown once, when created.',
      breadcrumbs: [{ label: 'Integrations' }, { label: 'API keys' }],
      actions: [toggle, button({ write: true, label: 'Create API key', icon: 'plus', variant: 'primary', onClick: () => openCreateDialog(reload) })],
    }),
    card({ body }),
    isOwner
      ? card({
          title: 'Keys by maker',
          description:
            "A key never does more than its maker's role allows now; a removed administrator's keys keep only their read scopes. Transfer them to another administrator or revoke them all.",
          body: makersBody,
        })
      : null,
  );
  replace(body, loadingBlock('Loading API keys…'));
  await reload();
}
