/**
 * Dashboard sessions as a table (decision 0061): device (from the user agent), address, started,
 * last used, and which one is this. Your account lists yours, with End on each other one and "End
 * all other sessions"; an owner's "Sessions" dialog on the administrators page lists someone else's,
 * with "End all sessions". Ending needs the fresh proof (api.js asks for it and retries).
 */
import { h } from './dom.js';
import { badge, button, timeEl } from './ui.js';

/**
 * The table of `sessions` (GET …/sessions). `onEnd(session)`, when given, puts an End button on
 * each session but the current one.
 */
export function sessionsTable(sessions, { caption, onEnd } = {}) {
  return h(
    'div',
    { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': `${caption} (scrolls sideways on narrow screens)` },
    h(
      'table',
      { class: 'table table-sessions' },
      h('caption', { class: 'visually-hidden', text: caption }),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Device', 'Address', 'Started', 'Last used'].map((c) => h('th', { scope: 'col', text: c })),
          onEnd ? h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Actions' })) : null,
        ),
      ),
      h(
        'tbody',
        {},
        sessions.map((s) =>
          h(
            'tr',
            { dataset: { sessionId: s.id, current: s.current ? 'true' : 'false' } },
            h(
              'th',
              { scope: 'row', class: 'cell-strong', title: s.user_agent ?? undefined },
              h('span', { class: 'session-device', text: s.device }),
              s.current ? [' ', badge('This session', 'info')] : null,
            ),
            h('td', {}, s.client_ip ? h('code', { class: 'code', text: s.client_ip }) : h('span', { class: 'muted', text: 'Unknown' })),
            h('td', {}, timeEl(s.created_at)),
            h('td', {}, s.current ? h('span', { text: 'Now' }) : timeEl(s.last_seen_at)),
            onEnd
              ? h(
                  'td',
                  { class: 'cell-actions' },
                  s.current
                    ? null
                    : button({ label: 'End', size: 'sm', variant: 'danger-ghost', ariaLabel: `End the session of ${s.device}`, onClick: () => onEnd(s) }),
                )
              : null,
          ),
        ),
      ),
    ),
  );
}
