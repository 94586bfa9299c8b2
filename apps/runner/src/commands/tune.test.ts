// `runner tune` up to the queue (dry run): the plan, the worker array's script, study.json, and the
// refusals that must come before anything is queued.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { environmentSpecHash, loadEnvironmentSpec, SpecValidationError } from '@kdgat/config';
import { FileStackOutputs, StudyExistsError, resolveStudyDir, type StackOutputs } from '@kdgat/planning';
import { LocalScheduler } from '@kdgat/schedulers';
import { tune } from './tune.ts';

const REPO = resolve(import.meta.dirname, '../../../..');
const EXAMPLE = join(REPO, 'examples/tune-vgae.yaml');

function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-tune-unit-'));
  const stack: StackOutputs = {
    profile: 'local',
    connection: { kind: 'local' },
    environments: [
      {
        name: 'cpu-local',
        backend: 'venv',
        prefix: join(dir, 'env'),
        activate: '',
        specHash: environmentSpecHash(loadEnvironmentSpec('cpu-local')),
        lockPath: '',
        lockHash: '',
      },
    ],
    scratch: {
      root: dir,
      cacheDirs: { synth: join(dir, 'cache/synth') },
      runsDir: join(dir, 'runs'),
      logsDir: join(dir, 'logs'),
    },
    scripts: {
      dir: join(dir, 's'),
      stageData: join(dir, 's/stage_data.sh'),
      epilog: join(dir, 's/job_epilog.sh'),
      trainGpu: join(dir, 's/t.sh'),
      preprocessGpu: join(dir, 's/p.sh'),
    },
  };
  const outputs = join(dir, 'outputs.json');
  writeFileSync(outputs, JSON.stringify(stack));
  const plan = (specPath = EXAMPLE) =>
    tune({
      specPath,
      dryRun: true,
      stackSource: new FileStackOutputs(outputs),
      schedulerInstance: new LocalScheduler(join(dir, 'sched')),
      repoRoot: REPO,
    });
  return { dir, stack, plan };
}

describe('runner tune (dry run)', () => {
  it('plans preprocess, then the tuned stage as one array of nWorkers study workers', async () => {
    const { plan } = setup();
    const r = await plan();
    expect(r.plan.jobs.map((j) => [j.key, j.dependsOn, j.array?.size, j.tune?.workers])).toEqual([
      ['preprocess', [], undefined, undefined],
      ['autoencoder', ['preprocess'], 2, 2],
    ]);
    const script = readFileSync(join(r.runDir, 'scripts/autoencoder.sbatch'), 'utf8');
    expect(script).toContain(`python -m kdgat tune --study-dir ${join(r.runDir, 'study')}`);
    // Each worker its own run root: the script says how many; the job library it loads gives each its dir.
    expect(script).toContain('hpc_tune_workers=2');
    const library = readFileSync(join(r.runDir, r.manifest.jobLibrary!.file!), 'utf8');
    expect(library).toContain('hpc_run_root=$hpc_run_root/worker_$hpc_task');
    expect(r.manifest.tune).toEqual({ study: 'tune-vgae', studyDir: join(r.runDir, 'study') });
  });

  it('writes study.json with the search, the base overrides and where earlier stages write', async () => {
    const { plan } = setup();
    const r = await plan();
    const study = JSON.parse(readFileSync(join(r.runDir, 'study/study.json'), 'utf8'));
    expect(study).toMatchObject({
      study: 'tune-vgae',
      stageId: 'autoencoder',
      stage: 'autoencoder',
      model: 'vgae',
      scale: 'small',
      dataset: 'synth',
      overrides: { 'data.num_workers': 0, 'training.patience': 0, 'training.max_epochs': 6 },
      space: { 'training.lr': { type: 'float', low: 0.00001, high: 0.05, log: true } },
      objective: { metric: 'val_loss', direction: 'minimize' },
      nTrials: 8,
      nWorkers: 2,
      pruner: { type: 'hyperband', minResource: 2, maxResource: 6, reductionFactor: 3 },
      inputsRoot: join(r.runDir, 'outputs'),
    });
  });

  it('refuses a study name that is taken, before anything is queued', async () => {
    const { plan, stack } = setup();
    mkdirSync(join(stack.scratch.runsDir, 'studies'), { recursive: true });
    symlinkSync('/elsewhere/study', join(stack.scratch.runsDir, 'studies', 'tune-vgae'));
    await expect(plan()).rejects.toThrow(StudyExistsError);
    await expect(plan()).rejects.toThrow(
      /study tune-vgae already exists \(\/elsewhere\/study\): choose another tune.study/,
    );
  });

  it('rejects a bad search space or pruner with every problem named, and writes nothing', async () => {
    const { plan, dir, stack } = setup();
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      readFileSync(EXAMPLE, 'utf8')
        .replace('training.lr:', 'training.lrate:')
        .replace('low: 8, high: 32', 'low: 32, high: 32')
        .replace('minResource: 2, maxResource: 6', 'minResource: 9, maxResource: 6'),
    );
    const err = await plan(bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SpecValidationError);
    expect((err as SpecValidationError).issues.map((i) => i.path)).toEqual([
      'tune.space.training.lrate',
      'tune.space.vgae.latent_dim.high',
      'tune.pruner.minResource',
    ]);
    expect(existsSync(stack.scratch.runsDir)).toBe(false);
  });

  it('asks for a tune: section, and finds studies by name or directory', async () => {
    const { plan, stack, dir } = setup();
    await expect(plan(join(REPO, 'examples/quickstart.yaml'))).rejects.toThrow(/has no tune: section/);
    expect(() => resolveStudyDir('nope', stack.scratch.runsDir)).toThrow(
      /no study of that name in .*studies/,
    );
    expect(() => resolveStudyDir(dir, stack.scratch.runsDir)).toThrow(/has no study.json/);
  });
});
