/**
 * The repository is self-contained: a clone holds everything its files point at. Over every tracked
 * text file (`git ls-files`):
 *  - a relative path (`../…`) never leaves the repository, resolved from the file's folder — the
 *    contract once lived beside the checkout, and a link to it led a fresh clone nowhere;
 *  - in markdown, such a path names a tracked file or folder, resolved from the file's folder or,
 *    in prose (`../x` in backticks), from the repository's root, as a reader may mean either;
 *  - every relative markdown link (`[text](target)`, `[label]: target`) names a tracked file or
 *    folder, and an anchor into a markdown file names one of its headings (GitHub's slugs).
 * Each failure names file:line and the path.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../production/process-helpers.ts';

const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: PROJECT_ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
const trackedFiles = new Set(tracked);
const trackedFolders = new Set(
  tracked.flatMap((file) =>
    file
      .split('/')
      .slice(0, -1)
      .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
  ),
);

/** The tracked files that are text (no NUL byte in their first 8 KiB), with their lines. */
const textFiles = tracked.flatMap((file) => {
  let bytes: Buffer;
  try {
    bytes = readFileSync(`${PROJECT_ROOT}/${file}`);
  } catch {
    return []; // tracked but deleted in this working tree: nothing to read
  }
  return bytes.subarray(0, 8192).includes(0) ? [] : [{ file, lines: bytes.toString('utf8').split('\n') }];
});
const markdown = textFiles.filter(({ file }) => file.endsWith('.md'));

/** `target` (a path relative to `from`, a folder of the repository; '' is the root) as a repository path, or null when it leaves it. */
function inRepository(from: string, target: string): string | null {
  const joined = posix.normalize(posix.join(from || '.', target)).replace(/\/$/, '');
  return joined === '..' || joined.startsWith('../') ? null : joined === '.' ? '' : joined;
}

const exists = (path: string) => path === '' || trackedFiles.has(path) || trackedFolders.has(path);

/** `../` paths in a line: `../x`, `../../x/y.md` (not `a/../b`, not `...`). */
const parentPaths = (line: string) => [...line.matchAll(/(?<![\w.$/-])((?:\.\.\/)+[^\s'"`)\]>,;*|]*)/g)].map((m) => m[1]!);

/** Markdown link targets of a line: inline `[text](target "title")` and reference definitions `[label]: target`. */
function linkTargets(line: string): string[] {
  const inline = [...line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
  const reference = /^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)/.exec(line)?.[1];
  return reference ? [...inline, reference] : inline;
}

/** The lines of a markdown file outside fenced code blocks (numbered from 1), where links are links. */
function proseLines(lines: string[]): [number, string][] {
  let fenced = false;
  const prose: [number, string][] = [];
  lines.forEach((line, i) => {
    if (/^\s{0,3}(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced) prose.push([i + 1, line]);
  });
  return prose;
}

/** GitHub's anchors of a markdown file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function headingAnchors(lines: string[]): Set<string> {
  const anchors = new Set<string>();
  for (const [, line] of proseLines(lines)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}_\- ]/gu, '')
      .replace(/ /g, '-');
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n++) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

const linesOf = new Map(textFiles.map(({ file, lines }) => [file, lines]));

describe('the repository is self-contained', () => {
  it('scans the tracked text files, this one and the contract among them', () => {
    const scanned = new Set(textFiles.map(({ file }) => file));
    for (const file of ['README.md', 'test/docs/self-contained.test.ts', 'docs/contract/store-integration-api.md', 'docs/contract/decisions.md'])
      expect(scanned, file).toContain(file);
  });

  it('has no relative path leading out of the repository (../shared, a ../.. above the root)', () => {
    const leaving: string[] = [];
    for (const { file, lines } of textFiles) {
      const folder = posix.dirname(file) === '.' ? '' : posix.dirname(file);
      lines.forEach((line, i) => {
        for (const path of parentPaths(line)) {
          if (inRepository(folder, path) === null) leaving.push(`${file}:${i + 1}: ${path} leaves the repository`);
        }
      });
    }
    expect(leaving).toEqual([]);
  });

  it('names only files and folders a clone has, in markdown prose', () => {
    const missing: string[] = [];
    for (const { file, lines } of markdown) {
      const folder = posix.dirname(file) === '.' ? '' : posix.dirname(file);
      lines.forEach((line, i) => {
        const links = new Set(linkTargets(line));
        for (const path of parentPaths(line)) {
          if (links.has(path) || [...links].some((link) => link.startsWith(`${path}#`))) continue; // a link: the next test's
          const candidates = [inRepository(folder, path), inRepository('', path)].filter((p): p is string => p !== null);
          if (!candidates.some(exists)) missing.push(`${file}:${i + 1}: ${path} names nothing in the repository`);
        }
      });
    }
    expect(missing).toEqual([]);
  });

  it('has no broken relative markdown link (a missing file or folder, an anchor naming no heading)', () => {
    const broken: string[] = [];
    for (const { file, lines } of markdown) {
      const folder = posix.dirname(file) === '.' ? '' : posix.dirname(file);
      for (const [n, line] of proseLines(lines)) {
        for (const target of linkTargets(line)) {
          if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue; // https:, mailto:, …
          const [path = '', anchor] = target.split('#');
          const resolved = path === '' ? file : inRepository(folder, decodeURIComponent(path));
          if (resolved === null) broken.push(`${file}:${n}: ${target} leaves the repository`);
          else if (!exists(resolved)) broken.push(`${file}:${n}: ${target} (${resolved}) does not exist`);
          else if (anchor && resolved.endsWith('.md') && !headingAnchors(linesOf.get(resolved) ?? []).has(anchor))
            broken.push(`${file}:${n}: ${target}: ${resolved} has no heading #${anchor}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
