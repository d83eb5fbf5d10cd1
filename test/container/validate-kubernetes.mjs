#!/usr/bin/env node
/**
 * Offline validation of deploy/kubernetes (CI step `kubernetes`; README "Deployment"):
 *   1. every object of every YAML file against the Kubernetes OpenAPI schemas shipped in the npm
 *      package `kubernetes-models` (types, required fields, formats, enums);
 *   2. what those schemas cannot see, but a broken rollout would: selectors that match the pod
 *      labels, Services and probes that name existing ports, probes on /readyz and /healthz,
 *      ConfigMap/Secret references that exist, configuration keys the service knows
 *      (src/config/config.ts), roles it has, resource requests and limits on every container, and
 *      a termination grace period longer than the preStop pause plus SHUTDOWN_TIMEOUT_MS;
 *   3. that kustomization.yaml lists files that exist and retags the image the containers use, and
 *      holds no Job (its pod template is immutable: re-applied with the next release's image it fails);
 *   4. the README's Kubernetes steps, run in order on a simulated fresh cluster and again for the next
 *      release: the Secret before the workloads that need it, the image set before anything runs it,
 *      every manifest applied and every wait naming something applied, nothing immutable changed;
 *      and the minimum Kubernetes version stated where a feature needs one (preStop sleep: 1.30).
 * Not checked offline (named in the README's "Deployment"): unknown fields (the schemas allow additional
 * properties), admission and defaulting by a real API server, and the cluster's own policies.
 * Usage: node --import tsx test/container/validate-kubernetes.mjs deploy/kubernetes [README.md]
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { EnvSchema } from '../../src/config/config.ts';

const dir = process.argv[2] ?? 'deploy/kubernetes';
const readmePath = process.argv[3] ?? 'README.md';
const problems = [];
const problem = (where, text) => problems.push(`${where}: ${text}`);
const ROLES = new Set(['all', 'serve', 'worker', 'migrate']);
const KNOWN_VARIABLES = new Set(Object.keys(EnvSchema.properties));

const objects = [];
let kustomization;
for (const file of readdirSync(dir)
  .filter((f) => /\.ya?ml$/.test(f))
  .sort()) {
  for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
    if (doc.errors.length) {
      problem(file, doc.errors.map((e) => e.message).join('; '));
      continue;
    }
    const value = doc.toJS();
    if (!value) continue;
    if (value.kind === 'Kustomization') kustomization = { file, value };
    else objects.push({ file, value, where: `${file} ${value.kind}/${value.metadata?.name}` });
  }
}

// 1. The Kubernetes schemas.
for (const { value, where } of objects) {
  const [group, version] = value.apiVersion.includes('/') ? value.apiVersion.split('/') : [undefined, value.apiVersion];
  const module = `kubernetes-models/${group ? `${group}/` : ''}${version}/${value.kind}`;
  let Model;
  try {
    Model = (await import(module))[value.kind];
  } catch {
    problem(where, `no schema for ${value.apiVersion} ${value.kind}`);
    continue;
  }
  try {
    new Model(value).validate();
  } catch (error) {
    problem(where, `schema: ${error.message}`);
  }
}

// 2. Consistency the schemas cannot see.
const byKind = (kind) => objects.filter((o) => o.value.kind === kind);
const matches = (selector, labels) => Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);
const workloads = [...byKind('Deployment'), ...byKind('Job')];
const configMaps = new Map(byKind('ConfigMap').map((o) => [o.value.metadata.name, o.value.data ?? {}]));
const secrets = new Map(byKind('Secret').map((o) => [o.value.metadata.name, { ...o.value.data, ...o.value.stringData }]));
for (const [name, data] of [...configMaps, ...secrets]) {
  for (const key of Object.keys(data)) if (!KNOWN_VARIABLES.has(key)) problem(name, `${key} is not a configuration variable of the service`);
}
for (const { value, where } of workloads) {
  const pod = value.spec.template;
  if (value.kind === 'Deployment' && !matches(value.spec.selector.matchLabels, pod.metadata?.labels)) problem(where, 'selector does not match the pod labels');
  const config = {};
  const init = new Set(pod.spec.initContainers ?? []);
  for (const container of [...init, ...pod.spec.containers]) {
    const at = `${where} ${init.has(container) ? 'init container' : 'container'} ${container.name}`;
    const ports = new Set((container.ports ?? []).map((p) => p.name));
    const [role] = container.args ?? [];
    if (!ROLES.has(role)) problem(at, `args[0] ${role} is not a role (${[...ROLES].join(', ')})`);
    for (const source of container.envFrom ?? []) {
      if (source.configMapRef && !configMaps.has(source.configMapRef.name)) problem(at, `ConfigMap ${source.configMapRef.name} is not defined`);
      if (source.secretRef && !secrets.has(source.secretRef.name)) problem(at, `Secret ${source.secretRef.name} is not defined`);
      Object.assign(config, configMaps.get(source.configMapRef?.name) ?? {}, secrets.get(source.secretRef?.name) ?? {});
    }
    const requests = container.resources?.requests ?? {};
    if (!requests.cpu || !requests.memory) problem(at, 'needs cpu and memory requests');
    if (!container.resources?.limits?.memory) problem(at, 'needs a memory limit');
    if (!init.has(container) && (role === 'serve' || role === 'worker')) {
      for (const [probe, path] of [
        ['readinessProbe', '/readyz'],
        ['livenessProbe', '/healthz'],
      ]) {
        const get = container[probe]?.httpGet;
        if (!get) problem(at, `needs a ${probe}`);
        else {
          if (get.path !== path) problem(at, `${probe} must GET ${path}, not ${get.path}`);
          if (typeof get.port === 'string' && !ports.has(get.port)) problem(at, `${probe} names port ${get.port}, which the container does not declare`);
        }
      }
      const port = Number(role === 'worker' ? config.METRICS_PORT : (config.PORT ?? 3000));
      const declared = (container.ports ?? []).map((p) => p.containerPort);
      if (!declared.includes(port))
        problem(at, `the ${role} role listens on ${port} (${role === 'worker' ? 'METRICS_PORT' : 'PORT'}), the container declares ${declared.join(', ')}`);
      const grace = (pod.spec.terminationGracePeriodSeconds ?? 30) * 1000;
      const pause = (container.lifecycle?.preStop?.sleep?.seconds ?? 0) * 1000;
      const shutdown = Number(config.SHUTDOWN_TIMEOUT_MS ?? 25_000);
      if (grace <= pause + shutdown)
        problem(
          at,
          `terminationGracePeriodSeconds ${grace / 1000} s is not longer than the preStop pause ${pause / 1000} s + SHUTDOWN_TIMEOUT_MS ${shutdown / 1000} s`,
        );
    }
  }
}
for (const { value, where } of byKind('Service')) {
  const target = byKind('Deployment').find((d) => matches(value.spec.selector, d.value.spec.template.metadata.labels));
  if (!target) {
    problem(where, 'selects no Deployment');
    continue;
  }
  const ports = new Set(target.value.spec.template.spec.containers.flatMap((c) => (c.ports ?? []).map((p) => p.name)));
  for (const port of value.spec.ports)
    if (typeof port.targetPort === 'string' && !ports.has(port.targetPort)) problem(where, `targetPort ${port.targetPort} is not a port of ${target.where}`);
}
for (const { value, where } of byKind('PodDisruptionBudget')) {
  const target = byKind('Deployment').find((d) => matches(value.spec.selector.matchLabels, d.value.spec.template.metadata.labels));
  if (!target) problem(where, 'selects no Deployment');
  else if (typeof value.spec.minAvailable === 'number' && value.spec.minAvailable >= target.value.spec.replicas)
    problem(where, `minAvailable ${value.spec.minAvailable} leaves no disruption with ${target.value.spec.replicas} replicas`);
}

// 3. The kustomization.
if (!kustomization) problem(dir, 'no kustomization.yaml');
else {
  for (const resource of kustomization.value.resources ?? [])
    if (!existsSync(join(dir, resource))) problem(kustomization.file, `resource ${resource} does not exist`);
  const images = new Set(
    workloads.flatMap((w) => [...(w.value.spec.template.spec.initContainers ?? []), ...w.value.spec.template.spec.containers].map((c) => c.image)),
  );
  for (const image of kustomization.value.images ?? []) if (!images.has(image.name)) problem(kustomization.file, `image ${image.name} is used by no container`);
  const listed = new Set(kustomization.value.resources);
  for (const file of new Set(objects.map((o) => o.file)))
    if (!listed.has(file) && !file.endsWith('.example.yaml')) problem(kustomization.file, `${file} is not listed in resources`);
}

for (const { value, file, where } of byKind('Job'))
  if ((kustomization?.value.resources ?? []).includes(file) && !value.metadata.generateName)
    problem(where, "a Job's pod template is immutable: `kubectl apply -k` of the next release (a new image) fails with `field is immutable`");

// 4. The README's steps in order, on a fresh cluster and then for the next release.
const readme = readFileSync(readmePath, 'utf8');
const section = /^### Kubernetes\n([\s\S]*?)(?=^### )/m.exec(readme)?.[1] ?? '';
const block = /^```(?:bash|sh)\n([\s\S]*?)^```$/m.exec(section)?.[1];
const usesPreStopSleep = workloads.some((w) => w.value.spec.template.spec.containers.some((c) => c.lifecycle?.preStop?.sleep));
if (usesPreStopSleep && !/Kubernetes 1\.(3\d|[4-9]\d)\b/.test(section))
  problem(readmePath, 'the preStop `sleep` action needs Kubernetes 1.30: the Kubernetes section must state the minimum version');
if (!block) problem(readmePath, 'no ```bash block of steps in the "### Kubernetes" section');
else {
  const steps = block
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => /^(\(?cd \S+ && )?(kubectl|kustomize) /.test(line));
  const cluster = { secrets: new Set(), applied: new Map(), imageSet: false };
  const inKustomization = objects.filter((o) => (kustomization?.value.resources ?? []).includes(o.file));
  const apply = (release, list, how) => {
    for (const { value, where } of list) {
      if (value.kind === 'Secret') cluster.secrets.add(value.metadata.name);
      const pod = value.spec?.template?.spec;
      if (pod) {
        for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
          for (const source of c.envFrom ?? [])
            if (source.secretRef && !cluster.secrets.has(source.secretRef.name))
              problem(readmePath, `release ${release}: ${how} applies ${where} before the Secret ${source.secretRef.name} it reads exists`);
          if (c.image === 'store-api' && !(how.includes('-k') && cluster.imageSet))
            problem(readmePath, `release ${release}: ${how} applies ${where} before its image is set (kustomize edit set image)`);
        }
      }
      const key = `${value.kind}/${value.metadata.name}`;
      const template = JSON.stringify({ spec: value.spec?.template, release: value.kind === 'Job' ? release : undefined });
      if (value.kind === 'Job' && cluster.applied.has(key) && cluster.applied.get(key) !== template)
        problem(readmePath, `release ${release}: ${how} re-applies ${key} with another pod template: field is immutable`);
      cluster.applied.set(key, template);
    }
  };
  for (const release of [1, 2]) {
    cluster.imageSet = false;
    for (const step of steps) {
      const words = step
        .replace(/^\(?cd \S+ && /, '')
        .replace(/\)$/, '')
        .split(/\s+/);
      if (words[0] === 'kustomize' && words[1] === 'edit' && words[2] === 'set' && words[3] === 'image') cluster.imageSet = true;
      else if (words[1] === 'create' && words[2] === 'secret') {
        if (release === 1) cluster.secrets.add(words[4]);
      } else if (words[1] === 'apply') {
        for (let i = 2; i < words.length; i++) {
          if (words[i] === '-k') apply(release, inKustomization, step);
          if (words[i] === '-f')
            apply(
              release,
              objects.filter((o) => join(dir, o.file) === words[i + 1] || o.file === words[i + 1]),
              step,
            );
        }
      } else if (words[1] === 'wait' || (words[1] === 'rollout' && words[2] === 'status')) {
        const target = words.find((w) => /^(job|deployment)\//.test(w));
        const [kind, name] = target?.split('/') ?? [];
        const applied = [...cluster.applied.keys()].some((k) => k.toLowerCase() === `${kind}/${name}`.toLowerCase());
        if (!target || !applied) problem(readmePath, `release ${release}: \`${step}\` waits for ${target ?? 'nothing'}, which no earlier step applied`);
      }
    }
  }
  for (const { value, where } of inKustomization)
    if (!cluster.applied.has(`${value.kind}/${value.metadata.name}`)) problem(readmePath, `the steps never apply ${where}`);
}

if (problems.length) {
  process.stderr.write(`deploy/kubernetes: ${problems.length} problem(s):\n  ${problems.join('\n  ')}\n`);
  process.exit(1);
}
process.stdout.write(`deploy/kubernetes: ${objects.length} objects valid against the Kubernetes schemas (kubernetes-models) and consistent\n`);
