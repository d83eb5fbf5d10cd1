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
 *   3. that kustomization.yaml lists files that exist and retags the image the containers use.
 * Not checked offline (named in docs/deployment.md): unknown fields (the schemas allow additional
 * properties), admission and defaulting by a real API server, and the cluster's own policies.
 * Usage: node --import tsx test/container/validate-kubernetes.mjs deploy/kubernetes
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { EnvSchema } from '../../src/config/config.ts';

const dir = process.argv[2] ?? 'deploy/kubernetes';
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
  for (const container of pod.spec.containers) {
    const at = `${where} container ${container.name}`;
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
    if (role === 'serve' || role === 'worker') {
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
  const images = new Set(workloads.flatMap((w) => w.value.spec.template.spec.containers.map((c) => c.image)));
  for (const image of kustomization.value.images ?? []) if (!images.has(image.name)) problem(kustomization.file, `image ${image.name} is used by no container`);
  const listed = new Set(kustomization.value.resources);
  for (const file of new Set(objects.map((o) => o.file)))
    if (!listed.has(file) && !file.endsWith('.example.yaml')) problem(kustomization.file, `${file} is not listed in resources`);
}

if (problems.length) {
  process.stderr.write(`deploy/kubernetes: ${problems.length} problem(s):\n  ${problems.join('\n  ')}\n`);
  process.exit(1);
}
process.stdout.write(`deploy/kubernetes: ${objects.length} objects valid against the Kubernetes schemas (kubernetes-models) and consistent\n`);
