// Each resource is said once: the rendered script's #SBATCH lines carry the resources (what a user
// reads and `sbatch --test-only` checks); the sbatch call adds only what exists at submission.
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadExperimentSpec, type Scalar } from '@kdgat/config';
import { sbatchArgs } from '@kdgat/schedulers';
import { buildPlan } from './build.ts';
import { renderPlan } from './render.ts';
import type { StackOutputs } from './stack/outputs.ts';
import { outputsFor } from './testing.ts';
import { requestFor } from './submit.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples');
const RUN_DIR = '/scratch/runs/x/run';

const stack: StackOutputs = {
  profile: 'local',
  connection: { kind: 'local' },
  environments: [
    {
      name: 'e',
      backend: 'venv',
      prefix: '/opt/env',
      activate: '',
      specHash: '',
      lockPath: '',
      lockHash: '',
    },
  ],
  scratch: {
    root: '/scratch',
    cacheDirs: { hcrl_sa: '/scratch/cache/hcrl_sa', synth: '/scratch/cache/synth' },
    runsDir: '/scratch/runs',
    logsDir: '/scratch/logs',
  },
  scripts: {
    dir: '/s',
    stageData: '/s/stage_data.sh',
    epilog: '/s/job_epilog.sh',
    trainGpu: '/s/t.sh',
    preprocessGpu: '/s/p.sh',
  },
};

/** The rendered jobs of an example for SLURM, with `maxArraySize` small enough to chunk a sweep. */
function renderedFor(file: string, maxArraySize: number, tuneWorkers?: number) {
  const { resolved } = loadExperimentSpec(join(EXAMPLES, file));
  const plan = buildPlan({
    experiment: resolved.spec.name,
    specHash: resolved.specHash,
    stages: resolved.stages,
    sweepPoints: resolved.sweepPoints as Record<string, Scalar>[],
    maxArraySize,
  });
  if (tuneWorkers !== undefined) {
    // As train() plans a study: the tuned stage runs as one array task per worker.
    const job = plan.jobs.find((j) => j.stageId === resolved.stages.at(-1)!.id)!;
    job.array = { size: tuneWorkers, concurrency: tuneWorkers, firstPoint: 0 };
    job.tune = { workers: tuneWorkers };
  }
  return renderPlan(plan, resolved, outputsFor(resolved, stack), RUN_DIR, 'slurm');
}

/** `--flag` of every `#SBATCH --flag[=value]` line, and of every `--flag[=value]` argument. */
const flagsOfScript = (script: string) =>
  script
    .split('\n')
    .filter((l) => l.startsWith('#SBATCH --'))
    .map((l) => l.slice('#SBATCH '.length).split('=')[0]!);
const flagsOfArgs = (args: string[]) => args.filter((a) => a.startsWith('--')).map((a) => a.split('=')[0]!);

describe('sbatch call and script', () => {
  const cases = [
    {
      what: 'a chain with requeue (kdgat-pitzer)',
      requeue: true,
      jobs: renderedFor('kdgat-pitzer.yaml', 1001),
    },
    { what: 'a sweep in array chunks of 5 (sweep-lr)', requeue: true, jobs: renderedFor('sweep-lr.yaml', 5) },
    {
      what: 'a study of 3 workers (tune-pitzer)',
      requeue: false,
      jobs: renderedFor('tune-pitzer.yaml', 1001, 3),
    },
  ];

  for (const { what, requeue, jobs } of cases) {
    it(`carry no resource twice: ${what}`, () => {
      const ids = new Map(jobs.map((r, i) => [r.job.key, String(100 + i)]));
      for (const rendered of jobs) {
        const script = flagsOfScript(rendered.script);
        // The script is complete on its own: arrays and the requeue signal are in it.
        if (rendered.job.array) expect(script).toContain('--array');
        if (requeue) expect(script).toContain('--signal');
        for (const mode of ['submit', 'test'] as const) {
          const args = flagsOfArgs(sbatchArgs(requestFor(rendered, RUN_DIR, ids), mode));
          expect(args.filter((flag) => script.includes(flag))).toEqual([]);
        }
      }
      // Dependencies exist only once the jobs they name are queued: the call adds them.
      const chained = jobs.filter((r) => r.job.dependsOn.length > 0);
      for (const rendered of chained) {
        expect(flagsOfScript(rendered.script)).not.toContain('--dependency');
        expect(flagsOfArgs(sbatchArgs(requestFor(rendered, RUN_DIR, ids), 'submit'))).toContain(
          '--dependency',
        );
      }
    });
  }

  it('the sweep chunks were planned as arrays (so the case above checks --array)', () => {
    const jobs = renderedFor('sweep-lr.yaml', 5);
    expect(jobs.map((r) => r.job.array?.size)).toEqual([5, 5, 2]);
    expect(jobs.map((r) => flagsOfScript(r.script).filter((f) => f === '--array'))).toEqual([
      ['--array'],
      ['--array'],
      ['--array'],
    ]);
  });
});
