/**
 * The second factor in the dashboard (decision 0028):
 *  - `proofDialog()`: asks for the password or a 6-digit code when the admin API answers
 *    403 reauthentication_required (api.js retries the request once it is given);
 *  - `enrolmentPanel()`: sets up an authenticator app: the QR code and the secret as text, a first
 *    code to confirm it, then the recovery codes, shown once;
 *  - `codeInput()`: the one-time-code field of the sign-in and the dialogs.
 */
import { h, replace } from './dom.js';
import { post } from './api.js';
import { button, callout, clearFormErrors, copyButton, field, formError, openDialog, runBusy, setFieldError, showFormError } from './ui.js';

/** A field for a 6-digit code (or, when `recovery`, a recovery code). */
export function codeInput({ recovery = false } = {}) {
  return h('input', {
    type: 'text',
    name: 'code',
    autocomplete: 'one-time-code',
    inputmode: recovery ? 'text' : 'numeric',
    spellcheck: false,
    maxlength: '64',
    class: 'code-input',
  });
}

/** A 6-digit code → send it as `code`; anything else is the password. */
function proofBody(value) {
  const compact = value.replace(/\s/g, '');
  return /^\d{6}$/.test(compact) ? { code: compact } : { password: value };
}

/** Asks for a fresh proof (password or code); resolves true once the service accepted it. */
export function proofDialog({ detail } = {}) {
  return new Promise((resolve) => {
    let proven = false;
    openDialog({
      title: 'Confirm it is you',
      description: 'This action is sensitive. Enter your password, or the 6-digit code of your authenticator app.',
      size: 'sm',
      onClose: () => resolve(proven),
      render: (close) => {
        const secret = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', autofocus: true });
        const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Confirm' }));
        const passwordField = field({
          label: 'Password or 6-digit code',
          control: secret,
          required: true,
          hint: detail ? undefined : 'A proof counts for a few minutes.',
        });
        const form = h(
          'form',
          { novalidate: true },
          passwordField,
          formError(),
          h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
        );
        form.addEventListener('submit', (event) => {
          event.preventDefault();
          clearFormErrors(form);
          if (!secret.value) {
            setFieldError(passwordField, 'Enter your password or a code.');
            secret.focus();
            return;
          }
          runBusy(submit, async () => {
            try {
              await post('/account/reauthenticate', proofBody(secret.value));
              proven = true;
              close();
            } catch (error) {
              secret.value = '';
              setFieldError(passwordField, error.message);
              secret.focus();
            }
          });
        });
        return form;
      },
    });
  });
}

/** The recovery codes, shown once, with a way to copy them all. */
export function recoveryCodesBlock(codes) {
  return h(
    'div',
    { class: 'recovery-codes' },
    callout({
      tone: 'warning',
      title: 'Save your recovery codes',
      text: 'Each code signs you in once if you lose your authenticator. They are shown only now: keep them somewhere safe, like a password manager.',
    }),
    h(
      'ol',
      { class: 'recovery-code-list', 'aria-label': 'Recovery codes' },
      codes.map((code) => h('li', {}, h('code', { class: 'code', text: code }))),
    ),
    h(
      'div',
      { class: 'button-row' },
      copyButton(() => codes.join('\n'), { label: 'Copy all codes' }),
    ),
  );
}

/**
 * Setting up an authenticator app. `onDone(status)` runs when the administrator has seen the
 * recovery codes and chosen to continue.
 */
export function enrolmentPanel({ onDone, doneLabel = 'Done' }) {
  const panel = h('div', { class: 'enrolment' });
  const startButton = button({
    label: 'Set up an authenticator app',
    variant: 'primary',
    onClick: async () => {
      const { data } = await post('/account/second-factor');
      showSecret(data);
    },
  });
  replace(
    panel,
    h('p', {
      text: 'Use an authenticator app (1Password, Google Authenticator, Microsoft Authenticator, Aegis…). After your password, sign-in asks for the 6-digit code it shows.',
    }),
    h('div', { class: 'form-actions' }, startButton),
  );

  function showSecret(data) {
    const code = codeInput();
    const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Turn on' }));
    const codeField = field({ label: 'Code from the app', control: code, required: true, hint: 'The 6 digits it shows now.' });
    const grouped = data.secret.match(/.{1,4}/g).join(' ');
    const form = h('form', { novalidate: true, class: 'narrow-form' }, codeField, formError(), h('div', { class: 'form-actions' }, submit));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      clearFormErrors(form);
      if (!/^\d{6}$/.test(code.value.replace(/\s/g, ''))) {
        setFieldError(codeField, 'Enter the 6-digit code your app shows.');
        code.focus();
        return;
      }
      runBusy(submit, async () => {
        try {
          const answer = await post('/account/second-factor/confirm', { code: code.value.replace(/\s/g, '') });
          showRecovery(answer.data);
        } catch (error) {
          code.value = '';
          if (error.code === 'invalid_second_factor') setFieldError(codeField, error.message);
          else showFormError(form, error.message);
          code.focus();
        }
      });
    });
    replace(
      panel,
      h(
        'ol',
        { class: 'enrolment-steps' },
        h(
          'li',
          {},
          h('p', { text: 'Scan this QR code with your authenticator app.' }),
          h('img', { class: 'qr-code', src: data.qr_code, alt: 'QR code to add this account to an authenticator app', width: '200', height: '200' }),
        ),
        h(
          'li',
          {},
          h('p', { text: 'Or type this key into the app (time-based, 6 digits, 30 seconds):' }),
          h('div', { class: 'secret-display' }, h('code', { class: 'code secret-value', text: grouped, dataset: { secret: data.secret } })),
          h(
            'div',
            { class: 'button-row' },
            copyButton(() => data.secret, { label: 'Copy key' }),
          ),
        ),
        h('li', {}, h('p', { text: 'Enter the code the app shows to turn it on.' }), form),
      ),
    );
    code.focus();
  }

  function showRecovery(status) {
    const done = button({ label: doneLabel, variant: 'primary', onClick: () => onDone(status) });
    replace(
      panel,
      callout({ tone: 'info', title: 'Two-factor authentication is on', text: 'From now on, sign-in asks for a code from your app.' }),
      recoveryCodesBlock(status.recovery_codes),
      h('div', { class: 'form-actions' }, done),
    );
    done.focus();
  }

  return panel;
}
