/**
 * Comments say why, not which ticket: a citation of a tracker the repository does not hold ("issue
 * 25", "issue 24, point 3") rots the day the tracker moves. Decision records (docs/decisions/) keep
 * their history; the code, its tests and the tools' code cite decisions instead. Fails naming each
 * file:line that cites an issue.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const CITATION = /\bissues? #?\d+/i;

describe('no tracker citations in code', () => {
  it('src/, bin/, packages/ and test/ name no issue number', () => {
    const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', 'src', 'bin', 'packages', 'test'], { cwd: ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((f) => /\.(ts|js|mjs|cjs)$/.test(f) && !f.includes('/generated/') && f !== 'test/unit/no-tracker-citations.test.ts');
    const found: string[] = [];
    for (const file of files) {
      let text: string;
      try {
        text = readFileSync(join(ROOT, file), 'utf8');
      } catch {
        continue; // listed but deleted in the working tree
      }
      text.split('\n').forEach((line, i) => {
        if (CITATION.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });
});
