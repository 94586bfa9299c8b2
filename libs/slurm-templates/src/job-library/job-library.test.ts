import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pitzerJob } from '../fixtures.test-support.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { jobInput, makeSite, writeJob, type SandboxSite } from '../test-support/job-harness.ts';
import { makeSandbox, runBash, type Sandbox } from '../test-support/sandbox.ts';
import { renderTrainJob } from '../train-job/render-train-job.ts';
import { JOB_LIBRARY, jobLibraryPath } from './job-library.ts';

// A job script loads the shell every job shares from one file named by its sha256; the rendered
// script runs under bash with the stub tools (python, module, conda, ...).
let sb: Sandbox;
let site: SandboxSite;
beforeEach(() => {
  sb = makeSandbox();
  site = makeSite(sb);
});
afterEach(() => sb.cleanup());

describe('the job library', () => {
  it('is named by its sha256 and kept under lib/ of a scripts dir', () => {
    expect(createHash('sha256').update(JOB_LIBRARY.text).digest('hex')).toBe(JOB_LIBRARY.sha256);
    expect(JOB_LIBRARY.file).toBe(`job-${JOB_LIBRARY.sha256.slice(0, 16)}.sh`);
    expect(jobLibraryPath('/fs/scratch/x/scripts/')).toBe(`/fs/scratch/x/scripts/lib/${JOB_LIBRARY.file}`);
  });

  it('runs the job when the file is the one the script names', () => {
    const r = runBash(writeJob(sb, jobInput(site)), [], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '5' }) });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('python').some((c) => c[2] === 'autoencoder')).toBe(true);
  });

  it('stops before anything runs when the file is missing, naming the file, the hash and the fix', () => {
    rmSync(site.jobLibrary.path);
    const r = runBash(writeJob(sb, jobInput(site)), [], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '6' }) });
    expect(r.status).toBe(69);
    expect(r.stderr).toBe(
      `kdgat-hpc: the job library ${site.jobLibrary.path} is not the one this script was rendered for ` +
        `(sha256 ${JOB_LIBRARY.sha256}; found: no readable file); to fix: ${site.jobLibrary.fix}\n`,
    );
    expect(site.jobLibrary.fix).toContain('kdgat-runner infra up --stack sandbox');
    expect(site.jobLibrary.fix).toContain('npx nx run infra:up --stack sandbox');
    expect(sb.calls('python')).toEqual([]);
    expect(sb.calls('module')).toEqual([]);
  });

  it('refuses a file changed in place (another version under this name), saying which hash it found', () => {
    const changed = JOB_LIBRARY.text.replace('set -euo pipefail', 'set -eo pipefail');
    writeFileSync(site.jobLibrary.path, changed);
    const r = runBash(writeJob(sb, jobInput(site)), [], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '7' }) });
    expect(r.status).toBe(69);
    const found = createHash('sha256').update(changed).digest('hex');
    expect(r.stderr).toContain(`(sha256 ${JOB_LIBRARY.sha256}; found: ${found})`);
    expect(sb.calls('python')).toEqual([]);
    expect(existsSync(join(site.layout.runsDir, 'exp'))).toBe(false);
  });

  it('hands the arguments of a hand-use script to the library (sbatch train_gpu.sh STAGE --model ...)', () => {
    const r = runBash(
      join(site.scriptsDir, 'train_gpu.sh'),
      ['autoencoder', '--model', 'vgae', '--scale', 'large', '--dataset', 'hcrl_sa'],
      { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '8' }) },
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(readFileSync(join(site.scriptsDir, 'train_gpu.sh'), 'utf8')).toContain(
      `hpc_job_library=${site.jobLibrary.path}`,
    );
    expect(
      sb
        .calls('python')
        .find((c) => c[2] === 'autoencoder')
        ?.slice(0, 9),
    ).toEqual(['-m', 'kdgat', 'autoencoder', '--model', 'vgae', '--scale', 'large', '--dataset', 'hcrl_sa']);
  });

  it('refuses to render a script naming another version of the library, or without a fix', () => {
    const other = pitzerJob({ jobLibrary: { path: '/x/scripts/lib/job-0000000000000000.sh', fix: 'up' } });
    expect(() => renderTrainJob(other)).toThrow(TemplateInputError);
    expect(() => renderTrainJob(other)).toThrow(/jobLibrary\.path = "\/x\/scripts\/lib\/job-0{16}\.sh"/);
    expect(() =>
      renderTrainJob(pitzerJob({ jobLibrary: { path: jobLibraryPath('/x/scripts'), fix: ' ' } })),
    ).toThrow(/jobLibrary\.fix/);
  });
});
