// Every example in examples/ loads, validates and plans as its comment says; rendering is pure.
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadExperimentSpec, type Scalar } from '@kdgat/config';
import { buildPlan } from './build.ts';
import { renderPlan } from './render.ts';
import { throttlePlan } from './throttle.ts';
import { DeclaredStackOutputs } from './stack/declared.ts';
import { checkoutStackConfigs } from './stack/configs.ts';
import { checkEnvironmentMatches } from './stack/outputs.ts';
import type { StackOutputs } from './stack/outputs.ts';
import { outputsFor } from './testing.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples');
const REPO = resolve(import.meta.dirname, '../../..');

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

/** An example planned and rendered against `outputs` (default: the fixture stack with its environments). */
function planOf(file: string, outputs?: StackOutputs, runDir = '/scratch/runs/x/run') {
  const { resolved } = loadExperimentSpec(join(EXAMPLES, file));
  const plan = buildPlan({
    experiment: resolved.spec.name,
    specHash: resolved.specHash,
    stages: resolved.stages,
    sweepPoints: resolved.sweepPoints as Record<string, Scalar>[],
    maxArraySize: 1001,
  });
  const rendered = renderPlan(
    plan,
    resolved,
    outputs ?? outputsFor(resolved, stack),
    runDir,
    resolved.cluster.scheduler,
  );
  return { resolved, plan, rendered };
}

describe('examples/', () => {
  it.each(
    readdirSync(EXAMPLES)
      .filter((f) => f.endsWith('.yaml'))
      .sort(),
  )(
    '%s plans against its stack before it is provisioned (every environment it uses declared)',
    async (file) => {
      const { resolved } = loadExperimentSpec(join(EXAMPLES, file));
      const stackName = resolved.cluster.name;
      const outputs = await new DeclaredStackOutputs(checkoutStackConfigs(REPO)).read(stackName);
      expect(() =>
        checkEnvironmentMatches(stackName, outputs, resolved.environments, outputs.declared.file),
      ).not.toThrow();
      const { rendered } = planOf(file, outputs, `${outputs.scratch.runsDir}/x/run`);
      // each job activates the environment of its stage
      for (const r of rendered) {
        const env = resolved.stages.find((s) => s.id === r.job.stageId)!.environment;
        expect(r.script).toContain(`envs/${env}`);
      }
    },
  );

  it('has the eleven examples', () => {
    expect(
      readdirSync(EXAMPLES)
        .filter((f) => f.endsWith('.yaml'))
        .sort(),
    ).toEqual([
      'cugraph.yaml',
      'kdgat-pitzer.yaml',
      'preprocess-sharded.yaml',
      'profile.yaml',
      'quickstart.yaml',
      'sweep-lr.yaml',
      'tiny-kd.yaml',
      'tiny-lightning.yaml',
      'trial-batch.yaml',
      'tune-pitzer.yaml',
      'tune-vgae.yaml',
    ]);
  });

  it("tiny-lightning: a researcher's own pipeline, its command and key=value overrides, Lightning's requeue", () => {
    const { resolved, plan, rendered } = planOf('tiny-lightning.yaml');
    expect(resolved.pipeline.name).toBe('tiny-lightning');
    expect(plan.jobs[0]!.array).toEqual({ size: 2, concurrency: 2, firstPoint: 0 });
    const script = rendered[0]!.script;
    expect(script).toContain("# The tiny-lightning pipeline's stage command (its declaration).");
    expect(script).toMatch(
      /python -m tiny_lightning\.cli train --model mlp --scale small --dataset synth --output-dir '\{run_dir\}'/,
    );
    expect(script).toContain('hpc_overrides=(\n  max_epochs=3\n)');
    expect(script).toContain('hpc_override_style=hydra');
    expect(script).toContain('hpc_requeue_contract=lightning');
    expect(script).toMatch(/^hpc_code=\S+\/examples\/pipelines\/tiny-lightning$/m);
    expect(rendered[0]!.table!.text).toContain('lr');
  });

  it("kdgat-pitzer against osc-pitzer's declared stack: every job exports KD_GAT_DATA_ROOT from the stack's rawDataRoot", async () => {
    const outputs = await new DeclaredStackOutputs(checkoutStackConfigs(REPO)).read('osc-pitzer');
    expect(outputs.jobEnvironment?.rawData['hcrl_sa']).toBe('/fs/ess/PAS1266/kd-gat/data/raw/hcrl_sa');
    const { rendered } = planOf('kdgat-pitzer.yaml', outputs, `${outputs.scratch.runsDir}/x/run`);
    for (const r of rendered)
      expect(r.script).toMatch(/^export KD_GAT_DATA_ROOT='?\/fs\/ess\/PAS1266\/kd-gat\/data\/raw'?$/m);
    // A stack without raw data sets nothing: the job inherits what the login gives it.
    for (const r of planOf('kdgat-pitzer.yaml').rendered) expect(r.script).not.toContain('KD_GAT_DATA_ROOT');
  });

  it("a stage's env wins over the stack's, and both are exported in the stage's job only", () => {
    const { resolved } = loadExperimentSpec(join(EXAMPLES, 'quickstart.yaml'));
    const withEnv = {
      ...resolved,
      stages: resolved.stages.map((s, i) => (i === 2 ? { ...s, env: { WANDB_MODE: 'disabled' } } : s)),
    };
    const plan = buildPlan({
      experiment: withEnv.spec.name,
      specHash: withEnv.specHash,
      stages: withEnv.stages,
      sweepPoints: [],
      maxArraySize: 1001,
    });
    const outputs = {
      ...outputsFor(withEnv, stack),
      jobEnvironment: { env: { WANDB_MODE: 'offline', HF_HOME: '/s/hf' }, rawData: {} },
    };
    const scripts = renderPlan(plan, withEnv, outputs, '/scratch/runs/x/run', 'local').map((r) => r.script);
    expect(scripts[0]).toMatch(/^export WANDB_MODE='?offline'?$/m);
    expect(scripts[2]).toMatch(/^export WANDB_MODE='?disabled'?$/m);
    expect(scripts[2]).toMatch(/^export HF_HOME='?\/s\/hf'?$/m);
    expect(scripts[2]!.match(/^export WANDB_MODE/gm)).toHaveLength(1);
  });

  it('tiny-kd: one teacher job, then a student array whose tasks read its checkpoint through their own words', () => {
    const { plan, rendered } = planOf('tiny-kd.yaml');
    expect(plan.jobs.map((j) => [j.key, j.dependsOn, j.aftercorr ?? [], j.array?.size ?? 1])).toEqual([
      ['teacher', [], [], 1],
      ['student', ['teacher'], [], 2],
    ]);
    const [teacher, student] = rendered.map((r) => r.script);
    expect(teacher).not.toContain('teacher-path');
    expect(student).toMatch(
      /--output-dir '\{run_dir\}' --teacher-path '\{run_root\}\/synth\/mlp_large_train\/checkpoints\/last\.ckpt'/,
    );
    expect(student).toContain('hpc_shared_run_dirs=(\n  synth/mlp_large_train\n)');
    expect(rendered[1]!.table!.text).toContain('lr');
    expect(rendered[0]!.table).toBeUndefined();
  });

  it('quickstart: a local preprocess -> autoencoder -> curriculum chain, no #SBATCH header', () => {
    const { resolved, plan, rendered } = planOf('quickstart.yaml');
    expect(resolved.cluster.scheduler).toBe('local');
    expect(plan.jobs.map((j) => j.key)).toEqual(['preprocess', 'autoencoder', 'curriculum']);
    for (const r of rendered) expect(r.script).not.toMatch(/^#SBATCH/m);
  });

  it('kdgat-pitzer: preprocess then a four-stage afterok chain with the plan resources and staging', () => {
    const { plan, rendered } = planOf('kdgat-pitzer.yaml');
    expect(plan.jobs.map((j) => [j.key, j.dependsOn])).toEqual([
      ['preprocess', []],
      ['autoencoder', ['preprocess']],
      ['curriculum', ['autoencoder']],
      ['distillation', ['curriculum']],
      ['evaluation', ['distillation']],
    ]);
    // preprocess writes the cache to scratch; the later stages stage it.
    expect(rendered[0]!.script).toContain('hpc_cache_root=/scratch/cache');
    expect(rendered[0]!.script).toContain('hpc_stage_datasets=()');
    const script = rendered[1]!.script;
    for (const line of [
      '#SBATCH --cpus-per-task=8',
      '#SBATCH --mem=85G',
      '#SBATCH --gres=gpu:v100:1',
      '#SBATCH --signal=B:USR1@300',
    ]) {
      expect(script).toContain(line);
    }
    expect(script).toMatch(/^hpc_stage_datasets=\(\n {2}hcrl_sa \/scratch\/cache\/hcrl_sa\n\)$/m);
  });

  it('preprocess-sharded: 16 shard tasks on the cpu partition at most 8 at once, then the join', () => {
    const { resolved, plan, rendered } = planOf('preprocess-sharded.yaml');
    expect(plan.jobs.map((j) => [j.key, j.array?.size, j.shards?.task])).toEqual([
      ['preprocess.shards', 16, true],
      ['preprocess', undefined, false],
    ]);
    expect(rendered[0]!.script).toMatch(/^#SBATCH --array=0-15%8$/m);
    expect(rendered[0]!.script).toMatch(/^#SBATCH --partition=cpu$/m);
    expect(rendered[1]!.script).toMatch(/^hpc_shard_task=0$/m);
    const { throttle } = throttlePlan(plan, {
      concurrency: resolved.spec.concurrency!,
      limits: resolved.cluster.limits,
    });
    expect(throttle).toMatchObject({ concurrency: 8, perArrayStage: 8, tasks: 17 });
  });

  it('sweep-lr: one array of 12 tasks, 4 at a time', () => {
    const { plan, rendered } = planOf('sweep-lr.yaml');
    expect(plan.jobs).toHaveLength(1);
    expect(plan.jobs[0]!.array).toEqual({ size: 12, concurrency: 4, firstPoint: 0 });
    expect(rendered[0]!.table!.text.trim().split('\n')).toHaveLength(24);
  });

  it('profile, trial-batch, cugraph, sweep-lr and tune-pitzer start from the VGAE of a kdgat-pitzer run', () => {
    for (const f of [
      'profile.yaml',
      'trial-batch.yaml',
      'cugraph.yaml',
      'sweep-lr.yaml',
      'tune-pitzer.yaml',
    ]) {
      const { plan, resolved } = planOf(f);
      expect(plan.jobs).toHaveLength(1);
      expect(resolved.stages[0]!.inputs).toEqual([{ run: 'kdgat-hcrl-sa', stage: 'autoencoder' }]);
    }
    expect(planOf('cugraph.yaml').resolved.environment.name).toBe('gnn-rapids-cugraphops');
  });
});
