/**
 * Settings → Your account: who you are signed in as, your role, changing your password (the
 * current one is asked; your other sessions end), two-factor authentication (set up with an
 * authenticator app, new recovery codes, turn off; lib/second-factor.js) and your sessions (where
 * you are signed in; end one or all others: lib/session-list.js) and passkeys (lib/passkeys.js).
 */
import { h, replace } from '../lib/dom.js';
import { del, get, post } from '../lib/api.js';
import {
  badge,
  button,
  callout,
  card,
  clearFormErrors,
  confirmDialog,
  errorState,
  field,
  formError,
  loadingBlock,
  pageHeader,
  runBusy,
  showFormError,
  showProblemOnForm,
  toast,
} from '../lib/ui.js';
import { enrolmentPanel, recoveryCodesBlock } from '../lib/second-factor.js';
import { sessionsTable } from '../lib/session-list.js';
import { passkeysPanel } from '../lib/passkeys.js';

const MIN_PASSWORD_LENGTH = 10;
const ROLE_TEXT = {
  owner: 'Owner: you can do everything, including managing administrators.',
  admin: 'Admin: you manage API keys, webhooks and deliveries; owners manage administrators.',
  viewer: 'Viewer: you can read everything but change nothing. Ask an owner for more rights.',
};

export async function renderAccount(view) {
  const twoFactor = h('div');
  const sessions = h('div');
  const current = h('input', { type: 'password', name: 'current_password', autocomplete: 'current-password' });
  const next = h('input', { type: 'password', name: 'new_password', autocomplete: 'new-password', minlength: String(MIN_PASSWORD_LENGTH) });
  const repeat = h('input', { type: 'password', name: 'new_password_repeat', autocomplete: 'new-password' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Change password' }));
  const form = h(
    'form',
    { novalidate: true, class: 'narrow-form' },
    // A hidden username field lets password managers file the new password under the right account.
    h('input', { type: 'email', name: 'username', autocomplete: 'username', value: view.session.email, hidden: true, 'aria-hidden': 'true', tabindex: '-1' }),
    field({ label: 'Current password', control: current, required: true }),
    field({ label: 'New password', control: next, required: true, hint: `At least ${MIN_PASSWORD_LENGTH} characters. Your other sessions are signed out.` }),
    field({ label: 'Repeat the new password', control: repeat, required: true }),
    formError(),
    h('div', { class: 'form-actions' }, submit),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    clearFormErrors(form);
    const problems = [];
    if (!current.value) problems.push({ param: 'current_password', message: 'Enter your current password.' });
    if (next.value.length < MIN_PASSWORD_LENGTH) problems.push({ param: 'new_password', message: `Use at least ${MIN_PASSWORD_LENGTH} characters.` });
    else if (next.value !== repeat.value) problems.push({ param: 'new_password_repeat', message: 'The two new passwords differ.' });
    if (problems.length) {
      showProblemOnForm(form, { errors: problems });
      form.querySelector('[aria-invalid="true"]')?.focus();
      return;
    }
    runBusy(submit, async () => {
      try {
        await post('/account/password', { current_password: current.value, new_password: next.value });
        form.reset();
        toast('Your password is changed. Your other sessions are signed out.');
      } catch (error) {
        if (!showProblemOnForm(form, error)) showFormError(form, error.message);
        form.querySelector('[aria-invalid="true"]')?.focus();
      }
    });
  });
  replace(
    view.root,
    pageHeader({ title: 'Your account', description: `Signed in as ${view.session.email}.`, breadcrumbs: [{ label: 'Settings' }, { label: 'Your account' }] }),
    h('div', { class: 'role-note' }, callout({ tone: 'info', text: ROLE_TEXT[view.session.role] ?? view.session.role })),
    card({ title: 'Password', body: form }),
    card({ title: 'Two-factor authentication', id: 'two-factor-title', body: twoFactor }),
    card({
      title: 'Passkeys',
      id: 'passkeys-title',
      description: 'Sign in with your device’s screen lock instead of a password; a passkey also counts as your second factor.',
      body: passkeysPanel(),
    }),
    card({
      title: 'Sessions',
      id: 'sessions-title',
      description: 'Where you are signed in. End a session you do not recognise, then change your password.',
      body: sessions,
    }),
  );
  await Promise.all([drawTwoFactor(), drawSessions()]);

  async function drawSessions() {
    replace(sessions, loadingBlock('Loading sessions…'));
    let data;
    try {
      ({ data } = await get('/account/sessions'));
    } catch (error) {
      if (error.status !== 401) replace(sessions, errorState(error, drawSessions));
      return;
    }
    const others = data.filter((s) => !s.current).length;
    replace(
      sessions,
      sessionsTable(data, {
        caption: 'Your sessions',
        onEnd: async (session) => {
          const ended = await confirmDialog({
            title: 'End this session?',
            message: `${session.device}${session.client_ip ? ` at ${session.client_ip}` : ''} is signed out at once.`,
            confirmLabel: 'End session',
            danger: true,
            action: () => del(`/account/sessions/${session.id}`),
          });
          if (!ended) return;
          toast(`Ended the session of ${session.device}.`);
          await drawSessions();
          document.querySelector('h1')?.focus();
        },
      }),
      others === 0
        ? h('p', { class: 'muted sessions-note', text: 'You are signed in nowhere else.' })
        : h(
            'div',
            { class: 'form-actions' },
            button({
              label: 'End all other sessions',
              variant: 'danger-ghost',
              onClick: async () => {
                const ended = await confirmDialog({
                  title: 'End all your other sessions?',
                  message: `${others === 1 ? 'The other session is' : `The ${others} other sessions are`} signed out at once; this one stays.`,
                  confirmLabel: 'End other sessions',
                  danger: true,
                  action: () => post('/account/sessions/end-others'),
                });
                if (!ended) return;
                toast('Your other sessions are ended.');
                await drawSessions();
                document.querySelector('h1')?.focus();
              },
            }),
          ),
    );
  }

  async function drawTwoFactor() {
    replace(twoFactor, loadingBlock('Loading…'));
    const [{ data }, passkeys] = await Promise.all([get('/account/second-factor'), get('/account/passkeys').catch(() => ({ data: [] }))]);
    // A passkey is a second factor too (decision 0063): the owner's requirement is met by either.
    view.session.second_factor = { enabled: data.enabled || passkeys.data.length > 0, required: data.required };
    if (!data.enabled) {
      replace(
        twoFactor,
        data.required ? callout({ tone: 'warning', text: 'An owner requires two-factor authentication of every administrator.' }) : null,
        enrolmentPanel({
          onDone: async () => {
            toast('Two-factor authentication is on.');
            await drawTwoFactor();
          },
        }),
      );
      return;
    }
    const codesLeft = data.recovery_codes_left;
    replace(
      twoFactor,
      h(
        'p',
        { class: 'two-factor-status' },
        badge('On', 'success'),
        ' Sign-in asks for a code from your authenticator app. ',
        `${codesLeft} recovery ${codesLeft === 1 ? 'code' : 'codes'} left.`,
      ),
      codesLeft <= 3 ? callout({ tone: 'warning', text: 'Few recovery codes are left: make new ones.' }) : null,
      h(
        'div',
        { class: 'button-row' },
        button({
          label: 'New recovery codes',
          onClick: async () => {
            const answer = await post('/account/second-factor/recovery-codes');
            replace(
              twoFactor,
              recoveryCodesBlock(answer.data.recovery_codes),
              h('div', { class: 'form-actions' }, button({ label: 'Done', variant: 'primary', onClick: () => drawTwoFactor() })),
            );
          },
        }),
        button({
          label: 'Turn off',
          variant: 'danger-ghost',
          onClick: async () => {
            const confirmed = await confirmDialog({
              title: 'Turn off two-factor authentication?',
              message: data.required
                ? 'An owner requires it: you will be asked to set up a new authenticator at once.'
                : 'Sign-in will ask for your password only. Your recovery codes stop working.',
              confirmLabel: 'Turn it off',
              danger: true,
              action: async () => {
                await del('/account/second-factor');
              },
            });
            if (!confirmed) return;
            toast('Two-factor authentication is off.');
            await drawTwoFactor();
          },
        }),
      ),
    );
  }
}
