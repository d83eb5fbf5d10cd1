/**
 * First-administrator setup, reached by the one-time link the server prints at start while no
 * administrator exists (#/setup?code=…). Checks the code first, so a wrong, used or expired link
 * shows what to do instead of a form; then asks for email and password (the rules of
 * `store-api admin create`) and signs in.
 */
import { h } from '../lib/dom.js';
import { post } from '../lib/api.js';
import { field, showFormError, showProblemOnForm, runBusy } from '../lib/ui.js';
import { cardForm, newPasswordFields, oneTimeCode, signInCard } from '../lib/sign-in-card.js';

export async function renderSetup(root, { code, onSignedIn, onSignIn }) {
  const link = oneTimeCode(root, { what: 'Setup link', onSignIn });
  if (!(await link.check('/admin/setup/check', code))) return;
  document.title = 'Create the first administrator · Store Integration Admin';
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', spellcheck: false });
  const { password, repeat, fields } = newPasswordFields();
  const { form, submit } = cardForm({
    fields: [field({ label: 'Email', control: email, required: true }), ...fields],
    label: 'Create administrator',
    onSubmit,
  });

  function onSubmit() {
    if (!email.value.trim() || !password.value) {
      showFormError(form, 'Enter an email and a password.');
      (email.value.trim() ? password : email).focus();
      return;
    }
    if (password.value !== repeat.value) {
      showFormError(form, 'The two passwords differ.');
      repeat.focus();
      return;
    }
    runBusy(submit, async () => {
      try {
        const answer = await post('/admin/setup', { code, email: email.value.trim(), password: password.value });
        onSignedIn(answer.data);
      } catch (error) {
        if (error.status === 400) {
          if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          return;
        }
        if (error.status === 429) {
          showFormError(form, error.message);
          return;
        }
        // The link stopped working meanwhile (used in another tab, expired): say so, as on arrival.
        link.refusal(error.message);
      }
    });
  }

  signInCard(
    root,
    h('h1', { class: 'sign-in-title', text: 'Create the first administrator' }),
    h('p', { class: 'sign-in-lead', text: 'This link works once. The administrator you create here signs in at once and can manage API keys and webhooks.' }),
    form,
  );
  email.focus();
}
