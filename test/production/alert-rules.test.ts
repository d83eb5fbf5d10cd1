/**
 * The alert rules (deploy/prometheus/alerts.yml), their promtool tests (alerts.test.yml) and the
 * Grafana dashboard (deploy/grafana/store-api.json) read only series the service exports: real
 * processes on each back end (embedded: `all`; PostgreSQL: `serve` and a `worker` with
 * METRICS_PORT), an HTTP delivery and a 429 made so the labelled series exist, then every metric
 * name of every expression must be on the API's or the worker's /metrics page. A renamed metric or
 * a typo in a rule fails here, not in an operator's silent alert. Every alert has its runbook
 * paragraph in docs/operations.md.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { parse } from 'yaml';
import type { Backend } from '../../src/db/database.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver } from '../webhooks/webhook-receiver.ts';
import { listeningUrl, PROJECT_ROOT, storeForProcesses } from './process-helpers.ts';

const RULES = join(PROJECT_ROOT, 'deploy/prometheus/alerts.yml');
const RULE_TESTS = join(PROJECT_ROOT, 'deploy/prometheus/alerts.test.yml');
const DASHBOARD = join(PROJECT_ROOT, 'deploy/grafana/store-api.json');
const OPERATIONS = join(PROJECT_ROOT, 'docs/operations.md');

/** Series only a process with an embedded data directory exports (PostgreSQL's disk is its server's). */
const EMBEDDED_ONLY = new Set(['store_api_data_dir_filesystem_avail_bytes', 'store_api_data_dir_filesystem_size_bytes']);
/** Labels Prometheus adds to every scraped series. */
const TARGET_LABELS = new Set(['instance', 'job']);
/** Series Prometheus records itself for each target (a rule may read them; no process exports them). */
const PROMETHEUS_OWN = new Set(['up']);

const PROMQL_WORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan', 'atan2']);

/**
 * The metric names a PromQL expression reads: identifiers left once strings, label matchers,
 * ranges, grouping clauses and Grafana variables are taken out, that are neither functions nor
 * aggregations (followed by `(`) nor PromQL keywords.
 */
function metricNamesOf(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w.:$])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()/g)) {
    if (!PROMQL_WORDS.has(match[1]!.toLowerCase())) names.add(match[1]!);
  }
  return [...names];
}

/** `name` → the label-name sets of its samples, from a Prometheus text page. */
function samplesOf(page: string): Map<string, Set<string>[]> {
  const samples = new Map<string, Set<string>[]>();
  for (const line of page.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const name = /^[a-zA-Z_:][\w:]*/.exec(line)![0];
    const braces = line.slice(name.length).startsWith('{') ? line.slice(name.length + 1, line.lastIndexOf('}')) : '';
    const labels = new Set([...braces.matchAll(/([a-zA-Z_]\w*)="(?:[^"\\]|\\.)*"/g)].map((m) => m[1]!));
    samples.set(name, [...(samples.get(name) ?? []), labels]);
  }
  return samples;
}

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  annotations?: Record<string, string>;
}

function ruleExpressions(): { where: string; expr: string }[] {
  const file = parse(readFileSync(RULES, 'utf8')) as { groups: { name: string; rules: Rule[] }[] };
  return file.groups.flatMap((group) => group.rules.map((rule) => ({ where: `alerts.yml ${rule.alert ?? rule.record}`, expr: String(rule.expr) })));
}

/** Every PromQL expression of the dashboard: panel targets (rows' panels too) and query variables. */
function dashboardExpressions(): { where: string; expr: string }[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    panels: { title: string; targets?: { expr: string }[]; panels?: unknown[] }[];
    templating: { list: { name: string; type: string; query?: string | { query: string } }[] };
  };
  const found: { where: string; expr: string }[] = [];
  const walk = (panels: { title: string; targets?: { expr: string }[]; panels?: unknown[] }[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) found.push({ where: `dashboard panel "${panel.title}"`, expr: target.expr });
      walk((panel.panels ?? []) as typeof panels);
    }
  };
  walk(dashboard.panels);
  for (const variable of dashboard.templating.list) {
    if (variable.type !== 'query') continue;
    const query = typeof variable.query === 'string' ? variable.query : (variable.query?.query ?? '');
    // label_values(<selector>, <label>): the selector is the expression; the label is no metric.
    const selector = /^\s*label_values\(\s*(.*?)\s*,\s*\w+\s*\)\s*$/.exec(query)?.[1] ?? query.replace(/^\s*query_result\((.*)\)\s*$/, '$1');
    found.push({ where: `dashboard variable $${variable.name}`, expr: selector });
  }
  return found;
}

/** What each back end's processes export: metric name → label-name sets of its samples. */
const exported = new Map<Backend, Map<string, Set<string>[]>>();

describe.each(backends)('what the service exports (%s)', (backend) => {
  const store = storeForProcesses(backend, 'alert-rules', async (db) => ({
    admin: (await createToken(db, { name: 'alert-rules admin', scopes: ['admin'] })).token,
    limited: (await createToken(db, { name: 'alert-rules limited', rateLimitStandard: 1, rateLimitExport: 1 })).token,
  }));
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => receiver?.close());

  it('scrapes the API and the worker after a delivery and a refusal', { timeout: 120_000 }, async () => {
    const env = { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_POLL_INTERVAL_MS: '100' };
    // The embedded database is one process's: `all`; on PostgreSQL the API and a worker apart.
    const api = store.start([backend === 'pglite' ? 'all' : 'serve'], env, { name: `api (${backend})` });
    const base = await listeningUrl(api);
    let workerBase = base;
    if (backend === 'postgres') {
      const worker = store.start(['worker'], { ...env, METRICS_PORT: '0' }, { name: `worker (${backend})` });
      workerBase = await listeningUrl(worker, /Worker metrics listening on (http:\/\/[^\s"]+)/);
      await worker.waitFor(/Webhook worker started/);
    } else {
      await api.waitFor(/Webhook worker started/);
    }
    const call = async (method: 'GET' | 'POST', path: string, token: string, body?: unknown) => {
      const res = await request(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.body.text();
      return { status: res.statusCode, json: text ? JSON.parse(text) : undefined };
    };
    const created = await call('POST', '/admin/api/v1/webhooks/endpoints', store.prepared.admin, { url: receiver.url });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    expect((await call('POST', `/admin/api/v1/webhooks/endpoints/${created.json.data.id}/ping`, store.prepared.admin)).status).toBe(202);
    await receiver.waitForRequests(1, 60_000);
    // A 429: the rate-limit refusals' series.
    expect((await call('GET', '/api/v1/products', store.prepared.limited)).status).toBe(200);
    expect((await call('GET', '/api/v1/products', store.prepared.limited)).status).toBe(429);

    const scrape = async (url: string) => {
      const res = await request(`${url}/metrics`);
      expect(res.statusCode).toBe(200);
      return res.body.text();
    };
    // The attempt is counted once its answer is read, just after the receiver has the request.
    let workerPage = '';
    await vi.waitFor(
      async () => {
        workerPage = await scrape(workerBase);
        expect(workerPage).toMatch(/^store_api_webhook_deliveries_attempted_total\{[^}]*destination_kind="http"/m);
      },
      { timeout: 30_000, interval: 100 },
    );
    const samples = samplesOf(`${await scrape(base)}\n${workerPage}`);
    exported.set(backend, samples);
    expect(samples.has('store_api_build_info')).toBe(true);
  });
});

describe('alert rules and dashboard', () => {
  const missingOn = (expressions: { where: string; expr: string }[]) => {
    const missing: string[] = [];
    for (const { where, expr } of expressions) {
      for (const name of metricNamesOf(expr)) {
        if (PROMETHEUS_OWN.has(name)) continue;
        const on = backends.filter((backend) => exported.get(backend)?.has(name));
        const needed = EMBEDDED_ONLY.has(name) ? backends.filter((backend) => backend === 'pglite') : backends;
        const lacking = needed.filter((backend) => !on.includes(backend));
        if (lacking.length > 0) missing.push(`${where}: ${name} (not exported on ${lacking.join(', ')})`);
      }
    }
    return missing;
  };

  it('reads the metric names of an expression, and only those', () => {
    expect(
      metricNamesOf(
        'histogram_quantile(0.95, sum by (le, route) (rate(http_request_duration_seconds_bucket{job=~"$job",route!~".*/export"}[$__rate_interval]))) > 0.5',
      ),
    ).toEqual(['http_request_duration_seconds_bucket']);
    expect(metricNamesOf('(process_open_fds / process_max_fds > 0.8) and on (instance, job) store_api_build_info offset 5m or absent(up{job="x"})')).toEqual([
      'process_open_fds',
      'process_max_fds',
      'store_api_build_info',
      'up',
    ]);
    expect(metricNamesOf('time() - store_api_webhook_worker_heartbeat_timestamp_seconds > 120')).toEqual([
      'store_api_webhook_worker_heartbeat_timestamp_seconds',
    ]);
  });

  it('every alert rule reads series the service exports', () => {
    expect(exported.size, 'the scrapes above ran').toBe(backends.length);
    const expressions = ruleExpressions();
    expect(expressions.length).toBeGreaterThanOrEqual(9);
    expect(missingOn(expressions)).toEqual([]);
  });

  it('a rule naming a series the service does not export is caught', () => {
    expect(exported.size).toBe(backends.length);
    expect(missingOn([{ where: 'a misspelled rule', expr: 'max(store_api_webhook_queue_ages_seconds) > 300' }])).toEqual([
      `a misspelled rule: store_api_webhook_queue_ages_seconds (not exported on ${backends.join(', ')})`,
    ]);
  });

  it('every dashboard query reads series the service exports', () => {
    expect(exported.size).toBe(backends.length);
    const expressions = dashboardExpressions();
    expect(expressions.length).toBeGreaterThanOrEqual(20);
    expect(missingOn(expressions)).toEqual([]);
  });

  it("the promtool tests' input series are named and labelled as the service exports them", () => {
    expect(exported.size).toBe(backends.length);
    const file = parse(readFileSync(RULE_TESTS, 'utf8')) as { rule_files: string[]; tests: { name: string; input_series: { series: string }[] }[] };
    expect(file.rule_files).toEqual(['alerts.yml']);
    const wrong: string[] = [];
    for (const test of file.tests) {
      for (const { series } of test.input_series) {
        const name = /^[a-zA-Z_:][\w:]*/.exec(series)![0];
        if (PROMETHEUS_OWN.has(name)) continue;
        const labels = [...series.matchAll(/([a-zA-Z_]\w*)="(?:[^"\\]|\\.)*"/g)].map((m) => m[1]!).filter((l) => !TARGET_LABELS.has(l));
        // Another service's process metrics are part of a case (they must not alert): prom-client's own names.
        const sets = backends.flatMap((backend) => exported.get(backend)?.get(name) ?? []);
        if (sets.length === 0) wrong.push(`${test.name}: ${name} is not exported`);
        else if (!sets.some((set) => labels.every((l) => set.has(l)) && set.size === labels.length)) {
          wrong.push(`${test.name}: ${series} has other labels than the exported ${name}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('every alert has a runbook annotation pointing at its paragraph in docs/operations.md', () => {
    const operations = readFileSync(OPERATIONS, 'utf8');
    const anchors = new Set(
      [...operations.matchAll(/^#{2,4} (.+)$/gm)].map((m) =>
        m[1]!
          .trim()
          .toLowerCase()
          .replace(/[^\w\- ]/g, '')
          .replace(/ /g, '-'),
      ),
    );
    const file = parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] };
    const alerts = file.groups.flatMap((group) => group.rules).filter((rule) => rule.alert);
    for (const rule of alerts) {
      expect(rule.annotations?.runbook, rule.alert).toBe(`docs/operations.md#${rule.alert!.toLowerCase()}`);
      expect(anchors.has(rule.alert!.toLowerCase()), `docs/operations.md has a heading "${rule.alert}"`).toBe(true);
    }
  });
});
