#!/usr/bin/env node
/**
 * deploy/systemd against the README's steps (CI step `systemd`, beside `systemd-analyze verify`):
 *   1. every unit's User= and Group= is created by a sysusers.d file of deploy/systemd;
 *   2. every EnvironmentFile= is optional (`-` prefix): the embedded default starts without one;
 *   3. the README's systemd block, in order: the sysusers file installed and `systemd-sysusers` run
 *      before anything is enabled or started, every unit installed before `daemon-reload`, reloaded
 *      before `enable`/`start`, every file it names exists, every unit it enables is installed.
 * Usage: node test/container/validate-systemd.mjs deploy/systemd README.md
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const dir = process.argv[2] ?? 'deploy/systemd';
const readmePath = process.argv[3] ?? 'README.md';
const problems = [];
const problem = (where, text) => problems.push(`${where}: ${text}`);

const files = readdirSync(dir);
const users = new Set();
const groups = new Set();
for (const file of files.filter((f) => f.endsWith('.sysusers.conf'))) {
  for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
    const [type, name] = line.trim().split(/\s+/);
    if (type === 'u') users.add(name) && groups.add(name);
    if (type === 'g') groups.add(name);
  }
}
const units = files.filter((f) => f.endsWith('.service'));
for (const unit of units) {
  const text = readFileSync(join(dir, unit), 'utf8');
  const setting = (key) => [...text.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((m) => m[1].trim());
  for (const user of setting('User')) if (!users.has(user)) problem(unit, `User=${user} is created by no sysusers.d file in ${dir}`);
  for (const group of setting('Group')) if (!groups.has(group)) problem(unit, `Group=${group} is created by no sysusers.d file in ${dir}`);
  for (const env of setting('EnvironmentFile'))
    if (!env.startsWith('-'))
      problem(unit, `EnvironmentFile=${env} is required: without it the unit cannot start, even for the embedded default (use -${env})`);
}

const section = /^### Production install[^\n]*\n([\s\S]*?)(?=^### )/m.exec(readFileSync(readmePath, 'utf8'))?.[1] ?? '';
const block = [...section.matchAll(/^```(?:bash|sh)\n([\s\S]*?)^```$/gm)].map((m) => m[1]).find((b) => b.includes('systemctl'));
if (!block) problem(readmePath, 'no ```bash block with the systemd steps in "### Production install"');
else {
  const steps = block
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter(Boolean);
  let usersCreated = false;
  let sysusersInstalled = false;
  let reloaded = false;
  const installed = new Set();
  for (const step of steps) {
    for (const command of step.split(/\s*&&\s*/)) {
      const words = command.split(/\s+/);
      if (words[0] === 'install' || words[0] === 'cp') {
        const sources = words.slice(1, -1).filter((w) => !w.startsWith('-') && !/^\d+$/.test(w) && w !== '.');
        for (const source of sources) {
          if (!existsSync(source)) problem(readmePath, `\`${command}\` names ${source}, which does not exist`);
          if (source.endsWith('.sysusers.conf')) sysusersInstalled = true;
          if (source.endsWith('.service')) {
            installed.add(basename(source));
            reloaded = false;
          }
        }
      } else if (words[0] === 'systemd-sysusers') {
        if (!sysusersInstalled) problem(readmePath, '`systemd-sysusers` runs before the sysusers file is installed');
        usersCreated = true;
      } else if (words[0] === 'chown' && !usersCreated) problem(readmePath, `\`${command}\` names the user store-api before systemd-sysusers created it`);
      else if (words[0] === 'systemctl' && words[1] === 'daemon-reload') reloaded = true;
      else if (words[0] === 'systemctl' && (words[1] === 'enable' || words[1] === 'start')) {
        if (!usersCreated) problem(readmePath, `\`${command}\` before systemd-sysusers created the service user`);
        if (!reloaded) problem(readmePath, `\`${command}\` before systemctl daemon-reload saw the installed units`);
        for (const name of words.slice(2).filter((w) => !w.startsWith('-'))) {
          const unit = name.includes('@') ? `${name.split('@')[0]}@.service` : `${name.replace(/\.service$/, '')}.service`;
          if (!installed.has(unit)) problem(readmePath, `\`${command}\` enables ${name}, whose unit ${unit} no earlier step installed`);
        }
      }
    }
  }
}

if (problems.length) {
  process.stderr.write(`deploy/systemd: ${problems.length} problem(s):\n  ${problems.join('\n  ')}\n`);
  process.exit(1);
}
process.stdout.write(`deploy/systemd: ${units.length} units, their user, optional env file and the README's steps in order\n`);
