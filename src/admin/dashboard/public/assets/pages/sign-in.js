/** Sign-in form. While no administrator exists the page says how to create the first one (setup link or CLI). */
import { h, replace } from '../lib/dom.js';
import { post } from '../lib/api.js';
import { callout, field, formError, showFormError, clearFormErrors, runBusy } from '../lib/ui.js';

export function renderSignIn(root, { notice, setupRequired, onSignedIn }) {
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', spellcheck: false });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary btn-block' }, h('span', { class: 'btn-label', text: 'Sign in' }));
  const form = h(
    'form',
    { class: 'sign-in-form', novalidate: true },
    field({ label: 'Email', control: email, required: true }),
    field({ label: 'Password', control: password, required: true }),
    formError(),
    submit,
  );

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    clearFormErrors(form);
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
        password.value = '';
        if (error.status === 429) showFormError(form, error.message);
        else if (error.status === 401) showFormError(form, 'Wrong email or password.');
        else showFormError(form, error.message);
        password.focus();
      }
    });
  });

  replace(
    root,
    h(
      'div',
      { class: 'sign-in-page' },
      h(
        'main',
        { id: 'main', class: 'sign-in-card', tabindex: '-1' },
        h(
          'div',
          { class: 'sign-in-brand' },
          h('img', { src: '/admin/assets/favicon.svg', alt: '', width: '40', height: '40' }),
          h('div', {}, h('p', { class: 'brand-name', text: 'Store Integration' }), h('p', { class: 'brand-sub', text: 'Admin dashboard' })),
        ),
        h('h1', { class: 'sign-in-title', text: 'Sign in' }),
        h('p', { class: 'sign-in-lead', text: 'Manage API keys, webhook endpoints and deliveries.' }),
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
      ),
      h('p', { class: 'sign-in-footer', text: 'Store Integration API' }),
    ),
  );
  email.focus();
}
