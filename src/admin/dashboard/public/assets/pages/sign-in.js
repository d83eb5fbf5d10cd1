/**
 * Sign-in form. While no administrator exists the page says how to create the first one (setup link
 * or CLI). An administrator with a second factor is asked, after the password, for the code of the
 * authenticator app or a recovery code (the email and password are sent again with it).
 */
import { h } from '../lib/dom.js';
import { post } from '../lib/api.js';
import { callout, field, formError, showFormError, clearFormErrors, runBusy, setFieldError } from '../lib/ui.js';
import { cardForm, signInCard } from '../lib/sign-in-card.js';
import { codeInput } from '../lib/second-factor.js';
import { ssoSignInBlock } from '../lib/sso-sign-in.js';
import { passkeyAssertion, passkeySignInBlock, passkeysSupported } from '../lib/passkeys.js';

export function renderSignIn(root, { notice, setupRequired, onSignedIn }) {
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', spellcheck: false });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password' });
  const { form, submit } = cardForm({
    fields: [field({ label: 'Email', control: email, required: true }), field({ label: 'Password', control: password, required: true })],
    label: 'Sign in',
    onSubmit,
  });

  function onSubmit() {
    if (!email.value.trim() || !password.value) {
      showFormError(form, 'Enter your email and password.');
      (email.value.trim() ? password : email).focus();
      return;
    }
    runBusy(submit, async () => {
      try {
        const answer = await post('/admin/session', { email: email.value.trim(), password: password.value });
        onSignedIn(answer.data);
      } catch (error) {
        if (error.code === 'second_factor_required') {
          askForCode(email.value.trim(), password.value, error.errors?.[0]?.param === 'passkey');
          return;
        }
        password.value = '';
        if (error.status === 429) showFormError(form, error.message);
        else if (error.status === 401) showFormError(form, 'Wrong email or password.');
        else showFormError(form, error.message);
        password.focus();
      }
    });
  }

  /** The second step: the code (or a recovery code) for the email and password just checked. */
  function askForCode(emailValue, passwordValue, passkeyOnly = false) {
    if (passkeyOnly) return askForPasskey(emailValue, passwordValue, null);
    let recovery = false;
    const code = codeInput();
    const codeField = field({ label: 'Authentication code', control: code, required: true, hint: 'The 6-digit code your authenticator app shows.' });
    const verify = h('button', { type: 'submit', class: 'btn btn-primary btn-block' }, h('span', { class: 'btn-label', text: 'Verify' }));
    const toggle = h('button', { type: 'button', class: 'btn btn-ghost btn-sm', text: 'Use a recovery code instead' });
    const codeForm = h('form', { class: 'sign-in-form', novalidate: true }, codeField, formError(), verify, h('p', { class: 'sign-in-alt' }, toggle));
    toggle.addEventListener('click', () => {
      recovery = !recovery;
      codeField.querySelector('label').firstChild.textContent = recovery ? 'Recovery code' : 'Authentication code';
      codeField.querySelector('.field-hint').textContent = recovery
        ? 'One of the codes you saved when you set up two-factor authentication (each works once).'
        : 'The 6-digit code your authenticator app shows.';
      code.inputMode = recovery ? 'text' : 'numeric';
      toggle.textContent = recovery ? 'Use the authenticator app instead' : 'Use a recovery code instead';
      setFieldError(codeField, '');
      code.value = '';
      code.focus();
    });
    codeForm.addEventListener('submit', (event) => {
      event.preventDefault();
      clearFormErrors(codeForm);
      if (!code.value.trim()) {
        setFieldError(codeField, recovery ? 'Enter one of your recovery codes.' : 'Enter the 6-digit code.');
        code.focus();
        return;
      }
      runBusy(verify, async () => {
        try {
          const answer = await post('/admin/session', { email: emailValue, password: passwordValue, code: code.value.trim() });
          onSignedIn(answer.data);
        } catch (error) {
          code.value = '';
          if (error.code === 'invalid_second_factor') setFieldError(codeField, error.message);
          else showFormError(codeForm, error.message);
          code.focus();
        }
      });
    });
    if (passkeysSupported()) codeForm.append(h('p', { class: 'sign-in-alt' }, usePasskeyButton(emailValue, passwordValue, codeForm)));
    form.replaceWith(codeForm);
    title.textContent = 'Two-factor authentication';
    lead.textContent = `Signing in as ${emailValue}.`;
    code.focus();
  }

  /** "Use a passkey" at the second-factor step (decision 0063): its answer goes with the email and password. */
  function usePasskeyButton(emailValue, passwordValue, stepForm) {
    const use = h('button', { type: 'button', class: 'btn btn-secondary btn-block', text: 'Use a passkey' });
    use.addEventListener('click', () =>
      runBusy(use, async () => {
        clearFormErrors(stepForm);
        try {
          const passkey = await passkeyAssertion('second_factor');
          if (!passkey) return;
          onSignedIn((await post('/admin/session', { email: emailValue, password: passwordValue, passkey })).data);
        } catch (error) {
          showFormError(stepForm, error.message);
        }
      }),
    );
    return use;
  }

  /** The second step of an account whose only second factor is a passkey. */
  function askForPasskey(emailValue, passwordValue) {
    const stepForm = h('form', { class: 'sign-in-form', novalidate: true }, formError());
    stepForm.append(
      passkeysSupported() ? usePasskeyButton(emailValue, passwordValue, stepForm) : callout({ tone: 'warning', text: 'This browser cannot use passkeys.' }),
    );
    stepForm.addEventListener('submit', (event) => event.preventDefault());
    form.replaceWith(stepForm);
    title.textContent = 'Two-factor authentication';
    lead.textContent = `Signing in as ${emailValue}: confirm with your passkey.`;
  }

  const title = h('h1', { class: 'sign-in-title', text: 'Sign in' });
  const lead = h('p', { class: 'sign-in-lead', text: 'Manage API keys, webhook endpoints and deliveries.' });
  signInCard(
    root,
    title,
    lead,
    notice ? callout({ tone: 'warning', text: notice }) : null,
    setupRequired
      ? callout({
          tone: 'info',
          title: 'No administrator yet',
          children: [
            h('p', {
              text: "Open the one-time setup link the server printed when it started (restart it for a new one), or create one from a terminal in the service's directory:",
            }),
            h('pre', { class: 'inline-pre' }, h('code', { text: 'npx store-api admin create --email you@example.com' })),
          ],
        })
      : null,
    form,
    setupRequired ? null : ssoSignInBlock(),
    setupRequired ? null : passkeySignInBlock({ onSignedIn, onError: (message) => showFormError(form, message) }),
  );
  email.focus();
}
