// bench/submit-sweep: plan + submit a 1,000-point sweep on the local SLURM the runner's way
// (render once per array, preflight, one sbatch per array) vs one sbatch per point, both measured
// in this run. Jobs are submitted held (--hold) and cancelled after each measurement, so the
// figures are the submission path only. Prints wall seconds, sbatch calls and the ratios.
//
//   node bench/submit-sweep/run.ts [--points 1000]
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { loadExperimentSpec } from '@kdgat/config';
import { JOB_LIBRARY, renderTrainJob } from '@kdgat/slurm-templates';
import { FileStackOutputs, jobLibraryFor, policiesOf } from '@kdgat/planning';
import { SlurmScheduler } from '@kdgat/schedulers';
import { train } from '../../apps/runner/src/commands/train.ts';
import { makeSite } from '../../apps/runner/test/e2e/harness.ts';
import { specYaml } from '../../apps/runner/test/e2e/specs.ts';

const REPO = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({ options: { points: { type: 'string', default: '1000' } } });
const points = Number(values.points);
if (!Number.isInteger(points) || points < 1)
  throw new Error(`--points ${values.points}: expected a whole number >= 1`);

function slurm(arg: string): number {
  return spawnSync('bash', [join(REPO, 'scripts', 'slurm-local.sh'), arg], { stdio: 'inherit' }).status ?? 1;
}
const startedHere = slurm('status') !== 0;
if (startedHere && slurm('up') !== 0) throw new Error('scripts/slurm-local.sh up failed');

function cancelAll(ids: string[]): void {
  for (let i = 0; i < ids.length; i += 500) spawnSync('scancel', ids.slice(i, i + 500));
}

try {
  const site = makeSite();
  // 1,000 points: 10 learning rates x 100 seeds, one stage.
  const lrs = Array.from({ length: 10 }, (_, i) => Number((0.1 / 2 ** i).toPrecision(6)));
  const seeds = Array.from({ length: Math.ceil(points / lrs.length) }, (_, i) => i);
  const specFile = site.spec(
    'bench',
    specYaml({
      name: 'bench-sweep',
      stages: [{ id: 'train', stage: 'curriculum', overrides: { 'training.max_epochs': 1 } }],
      sweep: { 'training.lr': lrs, 'training.seed': seeds },
    }),
  );

  // --- the runner: plan + render + preflight + one sbatch per array chunk ---
  const arrays = new SlurmScheduler({ extraArgs: ['--hold'] });
  let t0 = performance.now();
  const result = await train({
    specPath: specFile,
    stack: 'local',
    stackSource: new FileStackOutputs(site.stackFile),
    scheduler: 'slurm',
    schedulerInstance: arrays,
    force: true,
    repoRoot: REPO,
  });
  const runnerSeconds = (performance.now() - t0) / 1000;
  const runnerIds = result.manifest.jobs.map((j) => j.jobId!);
  const nPoints = result.manifest.jobs.reduce((n, j) => n + (j.array?.size ?? 1), 0);
  cancelAll(runnerIds);

  // --- baseline: one script and one sbatch per point ---
  const { resolved } = loadExperimentSpec(specFile);
  const stage = resolved.stages[0]!;
  const { requeue, staging } = policiesOf(resolved);
  const outputs = await new FileStackOutputs(site.stackFile).read('local');
  const dir = join(site.root, 'baseline');
  mkdirSync(join(dir, 'logs'), { recursive: true });
  // The shell every job shares: the site's job library, or (a stack without it) a copy beside the scripts.
  const jobLibrary = jobLibraryFor(outputs, dir, { stack: 'local' });
  if (jobLibrary.file) {
    mkdirSync(join(dir, 'scripts', 'lib'), { recursive: true });
    writeFileSync(join(dir, jobLibrary.file), JOB_LIBRARY.text);
  }
  const baseline = new SlurmScheduler({ extraArgs: ['--hold'] });
  const baselineIds: string[] = [];
  t0 = performance.now();
  for (const [i, point] of resolved.sweepPoints.slice(0, nPoints).entries()) {
    const { script } = renderTrainJob({
      experiment: resolved.spec.name,
      stage: { ...stage, overrides: { ...stage.overrides, ...point } },
      profile: { ...resolved.cluster, scheduler: 'slurm' },
      partition: resolved.partition,
      environment: { name: outputs.environment.name, backend: 'venv', prefix: outputs.environment.prefix },
      layout: { cacheDirs: outputs.scratch.cacheDirs, logsDir: join(dir, 'logs') },
      runRoot: join(dir, 'outputs', `point_${i}`),
      scripts: { stageData: outputs.scripts.stageData, epilog: outputs.scripts.epilog },
      jobLibrary,
      requeue,
      staging,
    });
    const path = join(dir, `point_${i}.sbatch`);
    writeFileSync(path, script);
    baselineIds.push(
      await baseline.submit({ name: `point-${i}`, scriptPath: path, cwd: dir, dependsOn: [] }),
    );
  }
  const baselineSeconds = (performance.now() - t0) / 1000;
  cancelAll(baselineIds);

  const runnerCalls = arrays.submitCalls + arrays.preflightCalls;
  console.log(
    `submit-sweep: ${nPoints} sweep points on the local SLURM (MaxArraySize ${(await arrays.limits()).maxArraySize})`,
  );
  console.log('');
  console.log('                          wall s   sbatch calls   jobs in squeue');
  console.log(
    `runner (arrays)        ${runnerSeconds.toFixed(2).padStart(9)}   ${String(runnerCalls).padStart(12)}   ${String(runnerIds.length).padStart(14)}   (${arrays.preflightCalls} --test-only + ${arrays.submitCalls} submit)`,
  );
  console.log(
    `one sbatch per point   ${baselineSeconds.toFixed(2).padStart(9)}   ${String(baseline.submitCalls).padStart(12)}   ${String(baselineIds.length).padStart(14)}`,
  );
  console.log('');
  console.log(
    `speed-up: ${(baselineSeconds / runnerSeconds).toFixed(1)}x less wall time, ${(baseline.submitCalls / runnerCalls).toFixed(0)}x fewer sbatch calls`,
  );
} finally {
  if (startedHere) slurm('down');
}
