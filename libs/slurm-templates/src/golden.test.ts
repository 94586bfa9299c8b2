import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { goldenFiles } from './golden-cases.test-support.ts';
import { shellFileLines, type ShellFile } from './shell/shell-files.ts';
import { bashSyntax, shellcheck } from './test-support/sandbox.ts';

// Golden records in the manner of submitit's _sbatch_test_record.txt: a rendering change shows up as a
// line diff against the file; `UPDATE_GOLDEN=1 npx vitest run` (or `vitest -u`) accepts it.
const files = goldenFiles();
const dir = mkdtempSync(join(tmpdir(), 'kdgat-golden-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('golden job scripts', () => {
  for (const [name, text] of Object.entries(files)) {
    it(`${name} matches __golden__/${name}`, async () => {
      await expect(text).toMatchFileSnapshot(`../__golden__/${name}`);
    });
  }

  it('every golden script parses (bash -n) and passes shellcheck with no findings', () => {
    const scripts = Object.entries(files)
      .filter(([name]) => name.endsWith('.sh'))
      .map(([name, text]) => {
        const path = join(dir, name);
        mkdirSync(dirname(path), { recursive: true });
        writeFileSync(path, text);
        return path;
      });
    expect(scripts.length).toBeGreaterThanOrEqual(14);
    expect(bashSyntax(scripts)).toBe('');
    expect(shellcheck(scripts)).toBe('');
  });

  it('every script holds the whole text of its shell files and sources nothing from the repository', () => {
    const madeOf = (name: string): ShellFile[] =>
      name.endsWith('stage_data.sh')
        ? ['stageData']
        : name.endsWith('job_epilog.sh')
          ? ['epilog']
          : ['jobStart', 'environment', 'jobRun'];
    for (const [name, text] of Object.entries(files).filter(([n]) => n.endsWith('.sh'))) {
      for (const file of madeOf(name)) expect(text, name).toContain(shellFileLines(file).join('\n'));
      const sourced = text.split('\n').filter((l) => /^\s*(source|\.)\s/.test(l));
      expect(
        sourced.filter((l) => /slurm-templates|src\/shell/.test(l)),
        name,
      ).toEqual([]);
    }
  });
});
