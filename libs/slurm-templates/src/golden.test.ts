import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { goldenFiles } from './golden-cases.test-support.ts';
import { JOB_LIBRARY } from './job-library/job-library.ts';
import { shellFileLines } from './shell/shell-files.ts';
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

  it('a job script holds its own values and loads the job library by its sha256; the library holds the shell files', () => {
    const library = files['job-library.sh']!;
    for (const file of ['jobStart', 'environment', 'jobRun'] as const)
      expect(library).toContain(shellFileLines(file).join('\n'));
    expect(library).toBe(JOB_LIBRARY.text);
    for (const [name, text] of Object.entries(files).filter(([n]) => n.endsWith('.sh'))) {
      const sourced = text.split('\n').filter((l) => /^\s*(source|\.)\s/.test(l));
      if (name.endsWith('stage_data.sh') || name.endsWith('job_epilog.sh')) {
        expect(text, name).toContain(
          shellFileLines(name.endsWith('stage_data.sh') ? 'stageData' : 'epilog').join('\n'),
        );
        continue;
      }
      if (name === 'job-library.sh') continue;
      // None of the shared shell in the job script itself: one check of the library's hash, one source.
      expect(text, name).not.toContain(shellFileLines('jobStart').join('\n'));
      expect(text, name).toContain(`hpc_job_library_sha256=${JOB_LIBRARY.sha256}`);
      expect(text, name).toMatch(new RegExp(`^hpc_job_library=\\S+/lib/${JOB_LIBRARY.file}$`, 'm'));
      expect(sourced, name).toEqual(['source "$hpc_job_library"']);
    }
  });

  it('a single-run job script is its #SBATCH lines, its values and the library line: under 80 lines', () => {
    expect(files['single-run.sh']!.split('\n').length).toBeLessThan(80);
  });
});
