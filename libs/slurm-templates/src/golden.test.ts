import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { goldenFiles } from './golden-cases.test-support.ts';
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
});
