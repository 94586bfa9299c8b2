// Where a run's scripts find the job library: the site's installed copy of this version, or the
// run's own copy written with its scripts (a stack provisioned before the library existed, or with
// another version of it).
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadExperimentSpec, type Scalar } from '@kdgat/config';
import { JOB_LIBRARY } from '@kdgat/slurm-templates';
import { buildPlan } from './build.ts';
import { jobLibraryFor, jobLibraryNote, renderPlan, writeRendered } from './render.ts';
import type { StackOutputs } from './stack/outputs.ts';
import { outputsFor, sampleOutputs } from './testing.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples');
const { resolved } = loadExperimentSpec(join(EXAMPLES, 'sweep-lr.yaml'));
const plan = buildPlan({
  experiment: resolved.spec.name,
  specHash: resolved.specHash,
  stages: resolved.stages,
  sweepPoints: resolved.sweepPoints as Record<string, Scalar>[],
  maxArraySize: 1001,
});
const RUN_DIR = '/s/runs/sweep/run-1';
const withLibrary = (jobLibrary?: { path: string; sha256: string }): StackOutputs => {
  const base = outputsFor(resolved, sampleOutputs);
  return {
    ...base,
    scratch: { ...base.scratch, cacheDirs: { hcrl_sa: '/s/cache/hcrl_sa' } },
    scripts: { ...base.scripts, ...(jobLibrary ? { jobLibrary } : {}) },
  };
};
const installed = { path: `/s/scripts/lib/${JOB_LIBRARY.file}`, sha256: JOB_LIBRARY.sha256 };
const libraryLine = (script: string) => script.split('\n').find((l) => l.startsWith('hpc_job_library='));

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

describe('the job library of a run', () => {
  it("loads the site's copy when the stack installed this version; the error names the stack's infra:up", () => {
    const rendered = renderPlan(plan, resolved, withLibrary(installed), RUN_DIR, 'slurm', undefined, {
      stack: 'osc-pitzer',
    });
    for (const r of rendered) {
      expect(r.library).toEqual({ ...installed, source: 'site' });
      expect(libraryLine(r.script)).toBe(`hpc_job_library=${installed.path}`);
      expect(r.script).toContain('npx nx run infra:up --stack osc-pitzer');
      expect(r.script).not.toContain('hpc_install_traps'); // the shared shell stays in the library
    }
    expect(jobLibraryNote(withLibrary(installed), rendered[0]!.library, 'osc-pitzer')).toBeUndefined();
  });

  it('carries its own copy on a stack from before the library (older outputs), written with the scripts', () => {
    const stack = withLibrary(undefined);
    const rendered = renderPlan(plan, resolved, stack, RUN_DIR, 'local');
    const file = `scripts/lib/${JOB_LIBRARY.file}`;
    expect(rendered[0]!.library).toEqual({
      path: join(RUN_DIR, file),
      sha256: JOB_LIBRARY.sha256,
      source: 'run',
      file,
    });
    expect(libraryLine(rendered[0]!.script)).toBe(`hpc_job_library=${RUN_DIR}/${file}`);
    expect(rendered[0]!.script).toContain(`--from-manifest ${RUN_DIR}`);
    const out = mkdtempSync(join(tmpdir(), 'kdgat-joblib-'));
    dirs.push(out);
    writeRendered(out, rendered);
    expect(readFileSync(join(out, file), 'utf8')).toBe(JOB_LIBRARY.text);
    expect(statSync(join(out, rendered[0]!.job.scriptFile)).mode & 0o111).not.toBe(0);
    expect(jobLibraryNote(stack, rendered[0]!.library, 'local')).toBe(
      `the site has no job library installed (provisioned before it existed): this run carries its own, ${file} ` +
        `(sha256 ${JOB_LIBRARY.sha256.slice(0, 12)}); kdgat-runner infra up --stack local (in the kdgat-hpc checkout: npx nx run infra:up --stack local) installs this version beside the site's scripts`,
    );
  });

  it("carries its own copy when the site has another version; a reproduction keeps the site's copy it loaded", () => {
    const other = withLibrary({ path: '/s/scripts/lib/job-0000000000000000.sh', sha256: '0'.repeat(64) });
    expect(jobLibraryFor(other, RUN_DIR).source).toBe('run');
    expect(jobLibraryNote(other, jobLibraryFor(other, RUN_DIR), 'x')).toContain(
      'the site has another version of the job library (sha256 000000000000)',
    );
    // The recorded run loaded this version from the site, which keeps every version it installed.
    const recorded = { ...installed, source: 'site' as const };
    expect(jobLibraryFor(other, RUN_DIR, { recorded })).toMatchObject({
      path: installed.path,
      source: 'site',
    });
    // A recorded library of another version is not this runner's: the run carries its own.
    expect(jobLibraryFor(other, RUN_DIR, { recorded: { ...recorded, sha256: 'f'.repeat(64) } }).source).toBe(
      'run',
    );
  });
});

describe("the stage's environment as the stack provisioned it", () => {
  it('loads the site modules the stack says its interpreter needs before the activation; none: no such lines', () => {
    const base = withLibrary(installed);
    const withModules: StackOutputs = {
      ...base,
      environments: base.environments.map((e) => ({ ...e, modules: ['python/3.12'] })),
    };
    const [job] = renderPlan(plan, resolved, withModules, RUN_DIR, 'slurm', undefined, {
      stack: 'osc-pitzer',
    });
    expect(job!.script).toMatch(/\nhpc_env_modules=\(\n {2}python\/3\.12\n\)\n(.*\n)*hpc_env_backend=/);
    const [plain] = renderPlan(plan, resolved, base, RUN_DIR, 'slurm', undefined, { stack: 'osc-pitzer' });
    expect(plain!.script).not.toContain('hpc_env_modules');
  });
});
