/**
 * A one-time link an owner handed out (#/link?code=…): an invitation (choose a password, become an
 * administrator) or a password reset (choose a new password; every other session ends). The code is
 * checked first, so a wrong, used or expired link says what to do instead of showing a form.
 */
import { h } from '../lib/dom.js';
import { post } from '../lib/api.js';
import { field, runBusy, setFieldError, showFormError, showProblemOnForm } from '../lib/ui.js';
import { codeInput } from '../lib/second-factor.js';
import { passkeyAssertion, passkeysSupported } from '../lib/passkeys.js';
import { MIN_PASSWORD_LENGTH, cardForm, newPasswordFields, oneTimeCode, signInCard } from '../lib/sign-in-card.js';

const ROLE_WORDS = { owner: 'an owner', admin: 'an admin', viewer: 'a viewer (read only)' };

export async function renderLink(root, { code: linkCode, onSignedIn, onSignIn }) {
  const oneTime = oneTimeCode(root, { what: 'Link', onSignIn });
  const link = await oneTime.check('/admin/links/check', linkCode);
  if (!link) return;
  const invitation = link.purpose === 'invitation';
  const title = invitation ? "Join the store's administrators" : 'Choose a new password';
  document.title = `${title} · Store Integration Admin`;
  const { password, repeat, fields } = newPasswordFields();
  // A reset replaces the password, not the second factor: its code (or its passkey) is asked for
  // with the new password. An account whose only second factor is a passkey answers with it.
  const appCode = link.second_factor && (link.authenticator_app ?? !link.passkey);
  const passkeyOnly = link.second_factor && link.passkey && !appCode;
  const code = appCode ? codeInput({ recovery: true }) : null;
  const codeField = code
    ? field({
        label: 'Authentication code',
        control: code,
        required: true,
        hint: 'The 6-digit code your authenticator app shows, or one of your recovery codes.',
      })
    : null;
  const { form, submit } = cardForm({
    fields: [
      h('input', { type: 'email', name: 'username', autocomplete: 'username', value: link.email, hidden: true }),
      ...fields,
      ...(codeField ? [codeField] : []),
    ],
    label: passkeyOnly ? 'Set password and confirm with your passkey' : invitation ? 'Create my account' : 'Set password and sign in',
    onSubmit: () => onSubmit(passkeyOnly),
  });
  // With an app and a passkey, the passkey may stand in for the code.
  if (appCode && link.passkey && passkeysSupported())
    form.append(
      h(
        'p',
        { class: 'sign-in-alt' },
        h('button', { type: 'button', class: 'btn btn-secondary btn-block', text: 'Use a passkey instead', onClick: () => onSubmit(true) }),
      ),
    );
  function onSubmit(withPasskey) {
    if (password.value.length < MIN_PASSWORD_LENGTH) {
      showProblemOnForm(form, { errors: [{ param: 'password', message: `Use at least ${MIN_PASSWORD_LENGTH} characters.` }] });
      password.focus();
      return;
    }
    if (password.value !== repeat.value) {
      showProblemOnForm(form, { errors: [{ param: 'password_repeat', message: 'The two passwords differ.' }] });
      repeat.focus();
      return;
    }
    if (code && !withPasskey && !code.value.trim()) {
      setFieldError(codeField, 'Enter the code of your authenticator app, or a recovery code.');
      code.focus();
      return;
    }
    runBusy(submit, async () => {
      try {
        let secondFactor = {};
        if (withPasskey) {
          const passkey = await passkeyAssertion('second_factor');
          if (!passkey) return; // cancelled at the browser's prompt
          secondFactor = { passkey };
        } else if (code) secondFactor = { second_factor_code: code.value.trim() };
        onSignedIn((await post('/admin/links/use', { code: linkCode, password: password.value, ...secondFactor })).data);
      } catch (error) {
        if (codeField && (error.code === 'invalid_second_factor' || error.code === 'second_factor_required')) {
          code.value = '';
          setFieldError(codeField, error.message);
          code.focus();
          return;
        }
        if (withPasskey && (error.code === 'invalid_second_factor' || error.code === 'second_factor_required' || !error.status)) {
          showFormError(form, error.message);
          return;
        }
        if (error.status === 400 || error.status === 429) {
          if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          return;
        }
        oneTime.refusal(error.message);
      }
    });
  }
  signInCard(
    root,
    h('h1', { class: 'sign-in-title', text: title }),
    h('p', {
      class: 'sign-in-lead',
      text: invitation
        ? `You are invited as ${ROLE_WORDS[link.role] ?? link.role}, signing in as ${link.email}. This link works once.`
        : `For ${link.email}. Every other session of this account is signed out. This link works once.`,
    }),
    form,
  );
  password.focus();
}
