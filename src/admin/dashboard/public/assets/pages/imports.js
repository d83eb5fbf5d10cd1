/**
 * Integrations → Stock imports: send a stock CSV (`sku,stock` or `sku,quantity_change`) and follow
 * the store's import jobs (decision 0060): each one's status, its progress (rows done of rows), who
 * sent it, its result or the lines it refused, and its notes (paused at a shutdown, resumed after a
 * crash, waiting while the store is suspended). While a job is queued or running the list refreshes
 * itself every few seconds. A small import (at most IMPORT_JOB_ROWS rows, none waiting) is applied at
 * once and answered with its counts; a larger one becomes a job here.
 */
import { h, replace } from '../lib/dom.js';
import { ADMIN_API, get, request } from '../lib/api.js';
import {
  badge,
  button,
  card,
  clearFormErrors,
  code,
  emptyState,
  errorState,
  field,
  formError,
  loadingBlock,
  pageHeader,
  showFormError,
  timeEl,
  toast,
} from '../lib/ui.js';
import { formatNumber } from '../lib/format.js';

const STATUS = {
  queued: ['Queued', 'info'],
  running: ['Running', 'warning'],
  succeeded: ['Succeeded', 'success'],
  failed: ['Failed', 'danger'],
};

/** How often the list is read again while a job is queued or running. */
const REFRESH_MS = 2000;

function statusBadge(job) {
  const [label, tone] = STATUS[job.status] ?? [job.status, 'neutral'];
  const text = job.status === 'queued' && job.queue_position ? `${label} (${job.queue_position} ahead)` : label;
  return badge(text, tone);
}

function progressCell(job) {
  const total = Math.max(job.rows_total, 0);
  const done = Math.min(job.rows_done, total);
  const label = `${formatNumber(done)} of ${formatNumber(total)} rows`;
  return h(
    'div',
    { class: 'import-progress' },
    h('progress', { max: String(total || 1), value: String(job.status === 'succeeded' ? total || 1 : done), 'aria-label': `Job progress: ${label}` }),
    h('span', { class: 'import-progress-text', text: label }),
  );
}

function outcomeCell(job) {
  if (job.result) return h('span', { text: `${formatNumber(job.result.movements)} movements, ${formatNumber(job.result.products)} products` });
  if (job.error) {
    const errors = job.error.errors ?? [];
    return h(
      'details',
      { class: 'import-error' },
      h('summary', { text: job.error.detail }),
      errors.length
        ? h(
            'ul',
            {},
            errors.map((e) => h('li', {}, code(e.param), ' ', e.message)),
          )
        : null,
    );
  }
  return h('span', { class: 'muted', text: '—' });
}

function notesCell(job) {
  if (!job.notes?.length) return h('span', { class: 'muted', text: '—' });
  return h(
    'details',
    { class: 'import-notes' },
    h('summary', { text: `${job.notes.length} ${job.notes.length === 1 ? 'note' : 'notes'}` }),
    h(
      'ul',
      {},
      job.notes.map((note) => h('li', { text: note })),
    ),
  );
}

function jobsTable(jobs) {
  return h(
    'div',
    { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Import jobs (scrolls sideways on narrow screens)' },
    h(
      'table',
      { class: 'table', id: 'import-jobs-table' },
      h('caption', { class: 'visually-hidden', text: 'Import jobs, newest first' }),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Sent', 'Status', 'Progress', 'By', 'Finished', 'Outcome', 'Notes'].map((c) => h('th', { scope: 'col', text: c })),
        ),
      ),
      h(
        'tbody',
        {},
        jobs.map((job) =>
          h(
            'tr',
            { dataset: { jobId: job.id, status: job.status } },
            h('td', {}, timeEl(job.created_at, { absolute: true })),
            h('td', {}, statusBadge(job)),
            h('td', {}, progressCell(job)),
            h('td', { text: job.created_by?.name ?? '—' }),
            h('td', {}, timeEl(job.finished_at)),
            h('td', {}, outcomeCell(job)),
            h('td', {}, notesCell(job)),
          ),
        ),
      ),
    ),
  );
}

/** The import form: a CSV file, sent as text/csv. */
function importForm(onSent) {
  const input = h('input', { type: 'file', name: 'file', accept: '.csv,text/csv', required: true });
  const form = h(
    'form',
    { class: 'form import-form requires-write', novalidate: true },
    field({
      label: 'Stock CSV',
      control: input,
      hint: 'Header sku,stock (set levels) or sku,quantity_change (add or take away), optionally note. Every row is checked before any is written.',
      required: true,
    }),
    formError(),
    h('div', { class: 'form-actions' }, button({ label: 'Import', icon: 'upload', variant: 'primary', type: 'submit' })),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearFormErrors(form);
    const file = input.files?.[0];
    if (!file) {
      showFormError(form, 'Choose a CSV file first.');
      return;
    }
    const submit = form.querySelector('button[type="submit"]');
    submit.disabled = true;
    try {
      const answer = await request('POST', `${ADMIN_API}/inventory/import`, await file.text(), { contentType: 'text/csv' });
      const data = answer?.data ?? {};
      if (data.status) toast(`${file.name} is queued as an import job: its progress is below.`, { tone: 'info' });
      else toast(`${file.name} imported: ${formatNumber(data.rows ?? 0)} rows, ${formatNumber(data.movements ?? 0)} stock movements.`);
      form.reset();
      onSent();
    } catch (error) {
      if (error.status !== 401) showFormError(form, error.message);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

export async function renderImports(view) {
  const body = h('div', { class: 'import-jobs' });
  let timer = null;
  let left = false;
  const load = async () => {
    clearTimeout(timer);
    try {
      const jobs = (await get(`${ADMIN_API}/inventory/import-jobs?limit=50`)).data ?? [];
      if (left) return;
      replace(
        body,
        jobs.length
          ? jobsTable(jobs)
          : emptyState({
              iconName: 'upload',
              title: 'No import jobs',
              text: 'A large stock import (from this page, the admin API or `store-api inventory import`) runs here as a job you can follow.',
            }),
      );
      if (jobs.some((job) => job.status === 'queued' || job.status === 'running')) timer = setTimeout(load, REFRESH_MS);
    } catch (error) {
      if (!left && error.status !== 401)
        replace(
          body,
          errorState(error, () => load()),
        );
    }
  };
  replace(
    view.root,
    pageHeader({
      title: 'Stock imports',
      description:
        "Set or change many products' stock from a CSV file. Large imports run in the background as jobs, one at a time per store and in the order sent; this page follows them.",
      breadcrumbs: [{ label: 'Integrations' }, { label: 'Stock imports' }],
    }),
    card({ title: 'Import a CSV', body: importForm(() => load()), className: 'requires-write' }),
    card({
      title: 'Import jobs',
      actions: [button({ label: 'Refresh', icon: 'refresh', size: 'sm', onClick: () => load() })],
      body,
    }),
  );
  replace(body, loadingBlock('Loading import jobs…'));
  await load();
  return () => {
    left = true;
    clearTimeout(timer);
  };
}
