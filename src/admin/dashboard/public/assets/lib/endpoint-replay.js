/**
 * The endpoint page's replay dialog: a time range, "failed only" (events that never got through to
 * this endpoint, decision 0021), and the number of deliveries the replay will queue, asked of the
 * admin API's dry run (GET …/replay-preview) before the button that confirms it says that number.
 */
import { h, uid } from './dom.js';
import { get, post, query } from './api.js';
import { formatNumber } from './format.js';
import { button, clearFormErrors, field, formError, openDialog, runBusy, setFieldError, showFormError, showProblemOnForm, toast } from './ui.js';

const plural = (n, one, many) => `${formatNumber(n)} ${n === 1 ? one : many}`;

export function openReplayDialog(endpoint, onQueued) {
  const toLocalInput = (ms) => {
    const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
    return d.toISOString().slice(0, 16);
  };
  openDialog({
    title: 'Replay events',
    description: 'Queue again every event of a time range this endpoint subscribes to, for example after the receiver lost data.',
    render: (close) => {
      const from = h('input', { type: 'datetime-local', name: 'from', value: toLocalInput(Date.now() - 3_600_000), autofocus: true });
      const to = h('input', { type: 'datetime-local', name: 'to', value: toLocalInput(Date.now()) });
      const failedId = uid('failed-only');
      const failedOnly = h('input', { type: 'checkbox', name: 'failed_only', id: failedId });
      const count = h('p', { class: 'replay-count', 'aria-live': 'polite', dataset: { role: 'replay-count' } });
      const submitLabel = h('span', { class: 'btn-label', text: 'Replay' });
      const submit = h('button', { type: 'submit', class: 'btn btn-primary', disabled: true }, submitLabel);
      const form = h(
        'form',
        { novalidate: true },
        h(
          'div',
          { class: 'field-row' },
          field({ label: 'From', control: from, required: true, hint: 'Your local time, inclusive' }),
          field({ label: 'To', control: to, required: true, hint: 'Inclusive, to the end of that minute' }),
        ),
        h(
          'div',
          { class: 'check check-standalone' },
          failedOnly,
          h(
            'label',
            { for: failedId },
            h('span', { class: 'check-label', text: 'Failed only' }),
            h('span', {
              class: 'check-hint',
              text: 'Only events that never got through: a dead letter, and no delivery that succeeded or is still being retried.',
            }),
          ),
        ),
        count,
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );

      /** The range and option as the API takes them, or null (said at the field) when invalid. */
      const params = () => {
        const fromMs = Date.parse(from.value);
        const toMs = Date.parse(to.value);
        if (Number.isNaN(fromMs)) {
          setFieldError(form.querySelector('[data-field="from"]'), 'Choose a start.');
          return null;
        }
        if (Number.isNaN(toMs) || fromMs > toMs) {
          setFieldError(form.querySelector('[data-field="to"]'), 'Choose an end after the start.');
          return null;
        }
        // The fields show minutes: "To" takes in the whole minute it shows (the API's `to` is
        // exclusive), so the default range, ending at the current minute, holds what just happened.
        return { from: new Date(fromMs).toISOString(), to: new Date(toMs + 60_000).toISOString(), failed_only: failedOnly.checked };
      };

      // The count shown belongs to the values in the form: any change asks again, and an older
      // answer arriving late is ignored.
      let asked = 0;
      let counted = null;
      const recount = async () => {
        const mine = ++asked;
        counted = null;
        submit.disabled = true;
        submitLabel.textContent = 'Replay';
        clearFormErrors(form);
        const p = params();
        if (!p) {
          count.textContent = '';
          return;
        }
        count.textContent = 'Counting…';
        try {
          const { data } = await get(`/webhooks/endpoints/${endpoint.id}/replay-preview${query(p)}`);
          if (mine !== asked) return;
          counted = { params: p, queued: data.queued };
          count.textContent =
            data.queued === 0
              ? `Nothing to replay: no ${p.failed_only ? 'failed ' : ''}event in this range.`
              : `This replay queues ${plural(data.queued, 'delivery', 'deliveries')}${p.failed_only ? ' (failed events only)' : ''}.`;
          submitLabel.textContent = data.queued === 0 ? 'Replay' : `Replay ${plural(data.queued, 'event', 'events')}`;
          submit.disabled = data.queued === 0;
        } catch (error) {
          if (mine !== asked) return;
          count.textContent = '';
          if (!showProblemOnForm(form, error)) showFormError(form, error.message);
        }
      };
      for (const control of [from, to, failedOnly]) control.addEventListener('change', recount);
      recount();

      form.addEventListener('submit', (event) => {
        event.preventDefault();
        if (!counted) return;
        const { params: p } = counted;
        runBusy(submit, async () => {
          try {
            const { data } = await post(`/webhooks/endpoints/${endpoint.id}/replay`, p);
            close();
            toast(`Queued ${plural(data.queued, 'delivery', 'deliveries')}.`);
            onQueued();
          } catch (error) {
            if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          }
        });
      });
      return form;
    },
  });
}
