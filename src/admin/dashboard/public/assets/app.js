/**
 * The dashboard's entry module: finds out who is signed in, draws the frame (sidebar, main area)
 * and routes by URL fragment:
 *
 *   #/overview                      counts and the last 24 h of webhook deliveries
 *   #/api-keys                      API tokens: list, create (shown once), revoke
 *   #/webhooks                      webhook endpoints
 *   #/webhooks/<id>                 one endpoint: secret, ping, enable/disable, its deliveries
 *   #/deliveries?endpoint_id=&status=   deliveries, filtered; retry one, several, all dead
 *   #/deliveries/<id>               one delivery: attempts and the event payload
 *   #/event-types                   the event catalog: each type's description, schema and example
 *   #/imports                       stock CSV imports: send one, follow the store's import jobs
 *   #/audit-log?actor=&action=&from=&to=   the administrators' audit log, filtered
 *   #/admins                        administrators, roles, invitations (owners change them)
 *   #/account                       one's own password and two-factor authentication
 *   #/setup?code=…                  signed out only: create the first administrator with the
 *                                   one-time link the server printed at start
 *   #/link?code=…                   an invitation or password-reset link an owner handed out
 *
 * An administrator the owner requires a second factor of, without one, sees only the page that sets
 * it up (showEnrolmentRequired) until it is on; a sensitive action answered 403
 * reauthentication_required opens the proof dialog and is retried (lib/api.js, lib/second-factor.js).
 *
 * Each page module exports render(view) and may return a cleanup function (timers), called when
 * the page is left.
 */
import { h, icon, replace } from './lib/dom.js';
import { ADMIN_API, get, post, del, onEnrolmentRequired, onReauthenticationRequired, onSessionLost, setCsrfToken } from './lib/api.js';
import { button, callout, toast, toastError } from './lib/ui.js';
import { enrolmentPanel, proofDialog } from './lib/second-factor.js';
import { addPasskeyFlow, passkeysSupported } from './lib/passkeys.js';
import { renderSignIn } from './pages/sign-in.js';
import { renderSetup } from './pages/setup.js';
import { renderOverview } from './pages/overview.js';
import { renderApiKeys } from './pages/api-keys.js';
import { renderWebhooks } from './pages/webhooks.js';
import { renderWebhookEndpoint } from './pages/webhook-endpoint.js';
import { renderDeliveries } from './pages/deliveries.js';
import { renderDelivery } from './pages/delivery.js';
import { renderAdmins } from './pages/admins.js';
import { renderAccount } from './pages/account.js';
import { renderAuditLog } from './pages/audit-log.js';
import { renderLink } from './pages/link.js';
import { renderEventTypes } from './pages/event-types.js';
import { renderImports } from './pages/imports.js';
import { navAlertMarker, refreshAlerts } from './lib/alerts.js';

const ROUTES = [
  { path: /^\/(?:overview)?$/, nav: 'overview', title: 'Overview', render: renderOverview },
  { path: /^\/api-keys$/, nav: 'api-keys', title: 'API keys', render: renderApiKeys },
  { path: /^\/webhooks$/, nav: 'webhooks', title: 'Webhooks', render: renderWebhooks },
  { path: /^\/webhooks\/([0-9a-f-]{36})$/i, nav: 'webhooks', title: 'Webhook endpoint', render: renderWebhookEndpoint },
  { path: /^\/deliveries$/, nav: 'deliveries', title: 'Deliveries', render: renderDeliveries },
  { path: /^\/deliveries\/([0-9a-f-]{36})$/i, nav: 'deliveries', title: 'Delivery', render: renderDelivery },
  { path: /^\/event-types$/, nav: 'event-types', title: 'Event catalog', render: renderEventTypes },
  { path: /^\/imports$/, nav: 'imports', title: 'Stock imports', render: renderImports },
  { path: /^\/audit-log$/, nav: 'audit-log', title: 'Audit log', render: renderAuditLog },
  { path: /^\/admins$/, nav: 'admins', title: 'Administrators', render: renderAdmins },
  { path: /^\/account$/, nav: 'account', title: 'Your account', render: renderAccount },
];

const NAV = [
  { id: 'overview', label: 'Overview', href: '#/overview', icon: 'overview' },
  { group: 'Integrations' },
  { id: 'api-keys', label: 'API keys', href: '#/api-keys', icon: 'key' },
  { id: 'webhooks', label: 'Webhooks', href: '#/webhooks', icon: 'webhook' },
  { id: 'deliveries', label: 'Deliveries', href: '#/deliveries', icon: 'deliveries' },
  { id: 'event-types', label: 'Event catalog', href: '#/event-types', icon: 'book' },
  { id: 'imports', label: 'Stock imports', href: '#/imports', icon: 'upload' },
  { group: 'Settings' },
  { id: 'admins', label: 'Administrators', href: '#/admins', icon: 'user' },
  { id: 'audit-log', label: 'Audit log', href: '#/audit-log', icon: 'list' },
  { id: 'account', label: 'Your account', href: '#/account', icon: 'key' },
];

const ROLE_LABELS = { owner: 'Owner', admin: 'Admin', viewer: 'Viewer (read only)' };

const root = document.getElementById('app');
let session = null;
let cleanup = null;
let shell = null;
/** Where to go after signing in again (the page the session was lost on). */
let returnTo = null;

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/overview';
  const [path, search = ''] = raw.split('?');
  return { path: path || '/overview', query: new URLSearchParams(search) };
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function buildShell() {
  const main = h('main', { id: 'main', class: 'main', tabindex: '-1' });
  // One list per group, each named by its heading (a group label cannot sit inside a <ul>).
  const navList = h('div', { class: 'nav-groups' });
  let list = h('ul', { class: 'nav-list' });
  navList.append(list);
  const alerts = navAlertMarker();
  for (const item of NAV) {
    if (item.group) {
      const labelId = `nav-group-${item.group.toLowerCase()}`;
      list = h('ul', { class: 'nav-list', 'aria-labelledby': labelId });
      navList.append(h('p', { class: 'nav-group', id: labelId }, h('span', { class: 'nav-group-label', text: item.group })), list);
      continue;
    }
    list.append(
      h(
        'li',
        {},
        h(
          'a',
          {
            class: 'nav-link',
            href: item.href,
            dataset: { nav: item.id },
            'aria-describedby': item.id === 'overview' ? alerts.description.id : undefined,
          },
          icon(item.icon),
          h('span', { text: item.label }),
          // Paused or disabled endpoints, new dead letters (lib/alerts.js).
          item.id === 'overview' ? alerts.marker : null,
        ),
        item.id === 'overview' ? alerts.description : null,
      ),
    );
  }
  const initials = session.email.slice(0, 2).toUpperCase();
  const signOutButton = h(
    'button',
    { type: 'button', class: 'btn btn-ghost btn-sm sidebar-signout', onClick: signOut },
    icon('logout'),
    h('span', { class: 'btn-label', text: 'Sign out' }),
  );
  // On a phone the navigation is a menu behind this button (app.css), so the page starts on the
  // first screen; choosing a page closes it.
  const menuToggle = h(
    'button',
    { type: 'button', class: 'btn btn-ghost btn-sm menu-toggle', 'aria-expanded': 'false', 'aria-controls': 'main-nav' },
    h('span', { class: 'btn-label', text: 'Menu' }),
  );
  // The store switcher (decision 0051, "Administrators per store"): shown once the account is
  // known to have more than one store; everything on a page is the selected store's.
  const switcher = h('div', { class: 'store-switcher', hidden: true });
  loadStoreSwitcher(switcher);
  const sidebar = h(
    'aside',
    { class: 'sidebar' },
    h(
      'div',
      { class: 'sidebar-top' },
      h(
        'a',
        { class: 'brand', href: '#/overview' },
        h('img', { src: '/admin/assets/favicon.svg', alt: '', width: '28', height: '28' }),
        h('span', { class: 'brand-text' }, h('span', { class: 'brand-name', text: 'Store Integration' }), h('span', { class: 'brand-sub', text: 'Admin' })),
      ),
      menuToggle,
    ),
    switcher,
    h('nav', { class: 'nav', id: 'main-nav', 'aria-label': 'Main' }, navList),
    h(
      'div',
      { class: 'sidebar-footer' },
      h(
        'div',
        { class: 'user' },
        h('span', { class: 'avatar', 'aria-hidden': 'true', text: initials }),
        h(
          'span',
          { class: 'user-text' },
          h('span', { class: 'user-email', title: session.email, text: session.email }),
          h('span', { class: 'user-role', text: ROLE_LABELS[session.role] ?? session.role }),
        ),
      ),
      signOutButton,
    ),
  );
  const setMenu = (open) => {
    sidebar.classList.toggle('menu-open', open);
    menuToggle.setAttribute('aria-expanded', String(open));
  };
  menuToggle.addEventListener('click', () => setMenu(!sidebar.classList.contains('menu-open')));
  navList.addEventListener('click', (event) => {
    if (event.target.closest('a')) setMenu(false);
  });
  replace(root, h('div', { class: 'layout' }, sidebar, main));
  root.classList.remove('app-loading');
  root.removeAttribute('aria-busy');
  return { main, navList };
}

/** Fills `container` with a labelled <select> of the account's stores when it has more than one. */
async function loadStoreSwitcher(container) {
  let stores;
  try {
    stores = (await get(`${ADMIN_API}/account/stores`)).data;
  } catch {
    return; // No switcher: the session's store is the only one shown.
  }
  if (!Array.isArray(stores) || stores.length < 2) return;
  const roleOf = (store) => ROLE_LABELS[store.role] ?? store.role;
  const select = h(
    'select',
    { id: 'store-select', class: 'store-select', onChange: () => switchStore(select, stores) },
    ...stores.map((store) =>
      h('option', {
        value: store.id,
        selected: store.id === session?.store?.id,
        text: `${store.name} · ${roleOf(store)}${store.status === 'suspended' ? ' · suspended' : ''}`,
      }),
    ),
  );
  container.replaceChildren(h('label', { for: 'store-select', class: 'store-switcher-label', text: 'Store' }), select);
  container.hidden = false;
}

/** Moves the session to the store chosen in `select`, then shows the page again for that store. */
async function switchStore(select, stores) {
  const chosen = stores.find((store) => store.id === select.value);
  if (!chosen || chosen.id === session?.store?.id) return;
  select.disabled = true;
  try {
    await post(`${ADMIN_API}/session/store`, { store_id: chosen.id });
    const answer = await get('/admin/session');
    if (answer.data) signedIn(answer.data);
  } catch (error) {
    select.value = session?.store?.id ?? '';
    select.disabled = false;
    toastError(error);
    return;
  }
  // Every page reloads for the store: a new shell (role, switcher), the page asked for again.
  shell = null;
  toast(`You are now in ${chosen.name} (${ROLE_LABELS[chosen.role] ?? chosen.role}).`, { tone: 'info' });
  route();
}

async function route() {
  if (!session) return;
  if (session.second_factor?.required && !session.second_factor.enabled) {
    showEnrolmentRequired();
    return;
  }
  enrolling = false;
  // Already signed in: neither the sign-in nor the setup page applies.
  if (location.hash === '#/sign-in' || location.hash.startsWith('#/setup') || location.hash.startsWith('#/link')) history.replaceState(null, '', '#/overview');
  const { path, query } = parseHash();
  const match = ROUTES.map((r) => ({ r, m: r.path.exec(path) })).find((x) => x.m);
  leavePage();
  if (typeof cleanup === 'function') cleanup();
  cleanup = null;
  if (!shell) shell = buildShell();
  for (const link of shell.navList.querySelectorAll('.nav-link')) {
    if (match && link.dataset.nav === match.r.nav) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const { main } = shell;
  main.replaceChildren();
  refreshAlerts();
  if (!match) {
    document.title = 'Not found · Store Integration Admin';
    main.append(
      h(
        'div',
        { class: 'page' },
        h('h1', { class: 'page-title', tabindex: '-1', text: 'Page not found' }),
        h('p', {}, 'There is no page at this address. ', h('a', { href: '#/overview', text: 'Go to the overview' }), '.'),
      ),
    );
    main.querySelector('h1')?.focus();
    return;
  }
  document.title = `${match.r.title} · Store Integration Admin`;
  const page = h('div', { class: 'page' });
  main.append(page);
  const view = {
    root: page,
    params: match.m.slice(1),
    query,
    session,
    navigate,
    /** Sets the window title once the page knows what it shows. */
    setTitle: (title) => {
      document.title = `${title} · Store Integration Admin`;
    },
  };
  const navigation = ++navigations;
  let pageCleanup;
  try {
    pageCleanup = await match.r.render(view);
  } catch (error) {
    if (error?.status !== 401) toastError(error);
  }
  if (navigation !== navigations) {
    // Left before it finished loading: stop what it started; the newer page owns the screen.
    if (typeof pageCleanup === 'function') pageCleanup();
    return;
  }
  cleanup = pageCleanup;
  // Move focus to the new page's title so keyboard users start there (not on first load).
  if (routedOnce) page.querySelector('h1')?.focus({ preventScroll: true });
  routedOnce = true;
  main.scrollTop = 0;
}
let routedOnce = false;

/**
 * What belongs to the page being left goes with it: dialogs opened over it (Back, a link, a new
 * address) and its error notifications (they named something on that page).
 */
function leavePage() {
  for (const dialog of document.querySelectorAll('dialog')) {
    if (dialog.open) dialog.close();
    dialog.remove();
  }
  for (const item of document.querySelectorAll('#toasts .toast-error')) item.remove();
}
/** Counts route() calls, so a slow page that was left can tell it is stale. */
let navigations = 0;

async function signOut() {
  try {
    await del('/admin/session');
  } catch (error) {
    toastError(error);
    return;
  }
  session = null;
  setCsrfToken(null);
  // Signing in again starts from the overview, not from the page signed out of.
  history.replaceState(null, '', '#/sign-in');
  showSignIn({ notice: null });
  toast('You are signed out.', { tone: 'info' });
}

function signedIn(data) {
  session = data;
  setCsrfToken(data.csrf_token);
  // Pages hide what the role may not do (app.css); the admin API enforces it.
  document.body.dataset.role = data.role;
}

/** The setup page of the link printed at start; afterwards the overview, signed in. */
function showSetup(code) {
  renderSetup(root, {
    code,
    onSignedIn: (data) => {
      signedIn(data);
      history.replaceState(null, '', '#/overview');
      route();
    },
    onSignIn: async () => {
      history.replaceState(null, '', '#/sign-in');
      const answer = await get('/admin/session').catch(() => ({ setup_required: false }));
      showSignIn({ notice: null, setupRequired: answer.setup_required });
    },
  });
}

/** An invitation or password-reset link; afterwards the overview, signed in as that administrator. */
function showLink(code) {
  leavePage();
  renderLink(root, {
    code,
    onSignedIn: (data) => {
      signedIn(data);
      history.replaceState(null, '', '#/overview');
      route();
    },
    onSignIn: async () => {
      history.replaceState(null, '', '#/sign-in');
      showSignIn({ notice: null });
    },
  });
}

/** Whether the enrolment page is what the screen shows (set once, however many 403s arrive). */
let enrolling = false;

/** The owner requires a second factor this administrator lacks: setting one up comes first. */
function showEnrolmentRequired() {
  if (enrolling) return;
  enrolling = true;
  leavePage();
  if (typeof cleanup === 'function') cleanup();
  cleanup = null;
  shell = null;
  routedOnce = false;
  document.title = 'Set up two-factor authentication · Store Integration Admin';
  root.classList.remove('app-loading');
  root.removeAttribute('aria-busy');
  replace(
    root,
    h(
      'div',
      { class: 'sign-in-page second-factor-page' },
      h(
        'main',
        { id: 'main', class: 'sign-in-card', tabindex: '-1' },
        h('h1', { class: 'sign-in-title', tabindex: '-1', text: 'Set up two-factor authentication' }),
        callout({
          tone: 'info',
          text: `An owner of this store requires two-factor authentication of every administrator. Set it up for ${session.email} to continue.`,
        }),
        enrolmentPanel({
          doneLabel: 'Continue to the dashboard',
          onDone: async () => {
            const answer = await get('/admin/session');
            signedIn(answer.data);
            enrolling = false;
            route();
          },
        }),
        // A passkey counts as the second factor too (decision 0063).
        passkeysSupported()
          ? h(
              'p',
              { class: 'sign-in-alt' },
              button({
                label: 'Add a passkey instead',
                variant: 'secondary',
                onClick: async () => {
                  if (!(await addPasskeyFlow())) return;
                  signedIn((await get('/admin/session')).data);
                  enrolling = false;
                  route();
                },
              }),
            )
          : null,
        h('div', { class: 'form-actions' }, button({ label: 'Sign out', variant: 'ghost', onClick: signOut })),
      ),
    ),
  );
  root.querySelector('h1')?.focus();
}

function showSignIn({ notice, setupRequired = false }) {
  enrolling = false;
  // A dialog or an error left over the old page would cover or confuse the sign-in form.
  leavePage();
  delete document.body.dataset.role;
  if (typeof cleanup === 'function') cleanup();
  cleanup = null;
  shell = null;
  routedOnce = false;
  document.title = 'Sign in · Store Integration Admin';
  root.classList.remove('app-loading');
  root.removeAttribute('aria-busy');
  renderSignIn(root, {
    notice,
    setupRequired,
    onSignedIn: (data) => {
      signedIn(data);
      const target = returnTo && returnTo !== '#/sign-in' ? returnTo : location.hash && location.hash !== '#/sign-in' ? location.hash : '#/overview';
      returnTo = null;
      if (location.hash !== target) {
        history.replaceState(null, '', target);
      }
      route();
    },
  });
}

onSessionLost(() => {
  if (!session) return;
  session = null;
  setCsrfToken(null);
  returnTo = location.hash;
  showSignIn({ notice: 'Your session has ended. Sign in again to continue.' });
});

// A sensitive action asks for the password or a code, then the request is retried (lib/api.js).
onReauthenticationRequired(() => proofDialog());
onEnrolmentRequired(() => {
  if (!session) return;
  session.second_factor = { enabled: false, required: true };
  showEnrolmentRequired();
});

window.addEventListener('hashchange', () => {
  // A setup link pasted into a tab that already shows the sign-in page only changes the fragment.
  if (!session && parseHash().path === '/setup') showSetup(parseHash().query.get('code') ?? '');
  else if (!session && parseHash().path === '/link') showLink(parseHash().query.get('code') ?? '');
  else route();
});

async function boot() {
  try {
    const answer = await get('/admin/session');
    if (answer.data) {
      signedIn(answer.data);
      await route();
    } else if (parseHash().path === '/setup') {
      showSetup(parseHash().query.get('code') ?? '');
    } else if (parseHash().path === '/link') {
      showLink(parseHash().query.get('code') ?? '');
    } else {
      showSignIn({ notice: null, setupRequired: answer.setup_required });
    }
  } catch (error) {
    replace(root, h('div', { class: 'boot-message', role: 'alert' }, `The dashboard could not start: ${error.message}`));
  }
}

boot();
