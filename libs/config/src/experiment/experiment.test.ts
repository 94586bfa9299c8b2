import { describe, expect, it } from 'vitest';
import { loadExperimentSpec, SpecValidationError, type SpecIssue } from '../index.ts';
import { LOCAL_SPEC, PITZER_SPEC } from '../test-support/specs.ts';

function issuesOf(text: string): SpecIssue[] {
  try {
    loadExperimentSpec({ text, file: 'spec.yaml' });
  } catch (e) {
    if (e instanceof SpecValidationError) return e.issues;
    throw e;
  }
  throw new Error('expected the spec to be rejected');
}

const load = (text: string) => loadExperimentSpec({ text, file: 'spec.yaml' });

describe('resolution', () => {
  it('fills resources from the partition and the plan (8 cpus, 85G, one V100)', () => {
    const { resolved } = load(PITZER_SPEC.replace(/ {4}resources:[\s\S]*$/, ''));
    expect(resolved.stages[0]!.resources).toEqual({
      cpus: 8,
      memGB: 85,
      gpus: { count: 1, type: 'v100' },
      nodes: 1,
      ntasksPerNode: 1,
      time: '08:00:00',
      partition: 'gpu',
      arrayConcurrency: 4,
    });
    expect(resolved.account).toBe('PAS1266');
    expect(resolved.specHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('expands a grid sweep into its cartesian product, then list points', () => {
    const { resolved } = load(
      `${LOCAL_SPEC}sweep:\n  grid:\n    training.lr: [0.1, 0.01]\n    training.seed: [0, 1, 2]\n  list:\n    - { training.lr: 0.5 }\n`,
    );
    expect(resolved.sweepPoints).toHaveLength(7);
    expect(resolved.sweepPoints[0]).toEqual({ 'training.lr': 0.1, 'training.seed': 0 });
    expect(resolved.sweepPoints[6]).toEqual({ 'training.lr': 0.5 });
  });

  it('turns profiling on through the pipeline overrides', () => {
    const { resolved } = load(`${LOCAL_SPEC}profiling:\n  enabled: true\n  steps: 3\n`);
    expect(resolved.stages[0]!.overrides).toMatchObject({
      'training.profile': true,
      'training.profile_steps': 3,
    });
  });

  it('hashes the same spec the same way whatever its formatting', () => {
    const a = load(LOCAL_SPEC).resolved.specHash;
    const b = load(`# a comment\n${LOCAL_SPEC.replace('gpus: { count: 0 }', 'gpus:\n        count: 0')}`)
      .resolved.specHash;
    const c = load(LOCAL_SPEC.replace('training.max_epochs: 2', 'training.max_epochs: 3')).resolved.specHash;
    expect(a).toBe(b);
    expect(a).not.toBe(c);
  });
});

describe('rules, each with its message', () => {
  it('gpus per node', () => {
    const [i] = issuesOf(PITZER_SPEC.replace('count: 1, type: v100', 'count: 3, type: v100'));
    expect(i).toMatchObject({
      path: 'stages[0].resources.gpus.count',
      line: 14,
      expected: '<= 2',
      found: '3',
    });
    expect(i!.message).toContain('3 GPUs per node do not fit partition gpu (2 per node)');
  });
  it('memory per node', () => {
    const [i] = issuesOf(PITZER_SPEC.replace('memGB: 72', 'memGB: 400'));
    expect(i!.message).toContain('400 GB does not fit a node of gpu (363 GB usable)');
  });
  it('walltime', () => {
    const [i] = issuesOf(PITZER_SPEC.replace('"8:00:00"', '"8-00:00:00"'));
    expect(i!.message).toContain('8-00:00:00 is longer than the 7-00:00:00 limit of gpu');
  });
  it('cores per node', () => {
    const [i] = issuesOf(PITZER_SPEC.replace('cpus: 8', 'cpus: 41'));
    expect(i!.message).toContain('41 cpus do not fit a node of gpu (40 cores)');
  });
  it('cores per node are cpus per task x tasks per node: 24 cpus x 2 tasks do not fit a 40-core node', () => {
    const twoTasks = PITZER_SPEC.replace('cpus: 8', 'cpus: 24').replace(
      'count: 1, type: v100',
      'count: 2, type: v100',
    );
    const [i, ...rest] = issuesOf(twoTasks);
    expect(rest).toEqual([]);
    expect(i).toMatchObject({
      file: 'spec.yaml',
      line: 12,
      path: 'stages[0].resources.cpus',
      expected: 'cpus x ntasksPerNode <= 40: cpus <= 20 with 2 tasks per node',
      found: '24 x 2 = 48',
    });
    expect(i!.message).toContain(
      '24 cpus per task x 2 tasks per node = 48 cores do not fit a node of gpu (40 cores)',
    );
    // the same 24 cpus as one task fit, and so do 20 per task for the two GPUs
    expect(() => load(PITZER_SPEC.replace('cpus: 8', 'cpus: 24'))).not.toThrow();
    expect(() => load(twoTasks.replace('cpus: 24', 'cpus: 20'))).not.toThrow();
    // an explicit task count without cpus is the field to blame for the default cpus
    const tasksOnly = PITZER_SPEC.replace('      cpus: 8\n', '      ntasksPerNode: 41\n');
    expect(issuesOf(tasksOnly)[0]).toMatchObject({
      path: 'stages[0].resources.ntasksPerNode',
      found: '1 x 41 = 41',
    });
  });
  it('default cpus leave room for every task: 8 per task, fewer when the tasks would not fit', () => {
    const noCpus = PITZER_SPEC.replace('      cpus: 8\n', '');
    expect(
      load(noCpus.replace('count: 1, type: v100', 'count: 2, type: v100')).resolved.stages[0]!.resources,
    ).toMatchObject({ cpus: 8, ntasksPerNode: 2 });
    expect(
      load(noCpus.replace('      memGB: 72\n', '      memGB: 72\n      ntasksPerNode: 8\n')).resolved
        .stages[0]!.resources,
    ).toMatchObject({ cpus: 5, ntasksPerNode: 8 });
  });
  it('GPU type of the partition', () => {
    const [i] = issuesOf(PITZER_SPEC.replace('type: v100', 'type: a100'));
    expect(i!.message).toBe('partition gpu has v100 GPUs, not a100');
  });
  it('an unknown partition names the ones that exist', () => {
    const [i] = issuesOf(PITZER_SPEC.replace('time: "8:00:00"', 'time: "8:00:00"\n      partition: gpux'));
    expect(i!.message).toBe('partition "gpux" does not exist on osc-pitzer');
    expect(i!.expected).toContain('gpu, gpu-exp, gpu-quad');
  });
  it('account required at OSC', () => {
    const [i] = issuesOf(PITZER_SPEC.replace('account: PAS1266\n', ''));
    expect(i).toMatchObject({ path: 'account' });
    expect(i!.message).toContain('osc-pitzer requires --account on every job');
  });
  it('billing warning when memory implies more cores than requested (85G on 8 cpus = 10 cores)', () => {
    const { warnings } = load(PITZER_SPEC.replace('memGB: 72', 'memGB: 85'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('85G on 8 cpus is billed as 10 cores on osc-pitzer');
    expect(load(PITZER_SPEC).warnings).toEqual([]);
  });
  it('the billing warning counts the cores of every task: 200G on 2 tasks x 4 cpus is billed as 23 cores on gpu, 13 on gpu-quad', () => {
    const spec = (partition: string) =>
      PITZER_SPEC.replace('cpus: 8', 'cpus: 4')
        .replace('memGB: 72', 'memGB: 200')
        .replace('count: 1, type: v100', 'count: 2, type: v100')
        .replace('time: "8:00:00"', `time: "8:00:00"\n      partition: ${partition}`);
    // ceil(200 / 9.074) = 23 cores on the 40-core gpu nodes, against 2 x 4 = 8 requested
    expect(load(spec('gpu')).warnings).toEqual([
      'stages[0] (ae): 200G on 2 tasks x 4 cpus (8 cores per node) is billed as 23 cores on osc-pitzer (9.074 GB per core on gpu): ' +
        'ask for 11 cpus per task (more DataLoader workers for free) or at most 72G',
    ]);
    // ceil(200 / 15.5) = 13 cores on gpu-quad (744 GB / 48 cores)
    expect(load(spec('gpu-quad')).warnings[0]).toContain(
      '200G on 2 tasks x 4 cpus (8 cores per node) is billed as 13 cores on osc-pitzer (15.5 GB per core on gpu-quad)',
    );
    // 2 tasks x 12 cpus = 24 cores: more than the 23 the memory is billed as, so no warning
    expect(load(spec('gpu').replace('cpus: 4', 'cpus: 12')).warnings).toEqual([]);
  });
  it('DataLoader workers + 1 must fit the cpus (warned)', () => {
    const { warnings } = load(
      PITZER_SPEC.replace('    resources:', '    overrides:\n      data.num_workers: 8\n    resources:'),
    );
    expect(warnings.join('\n')).toContain(
      'data.num_workers=8 plus the training process needs 9 cpus but 8 are requested',
    );
    expect(
      load(PITZER_SPEC.replace('    resources:', '    overrides:\n      data.num_workers: 7\n    resources:'))
        .warnings,
    ).toEqual([]);
  });
  it('use_cugraph on an environment without pylibcugraphops', () => {
    const spec = PITZER_SPEC.replace(
      '    resources:',
      '    overrides:\n      vgae.use_cugraph: true\n    resources:',
    );
    const [i] = issuesOf(spec);
    expect(i).toMatchObject({ path: 'stages[0].overrides.vgae.use_cugraph', line: 12 });
    expect(i!.message).toContain(
      'needs pylibcugraphops (CuGraphGATConv), which environment gnn-rapids does not have',
    );
    expect(load(`${spec}allowFallback: true\n`).resolved.stages[0]!.overrides['vgae.use_cugraph']).toBe(true);
    expect(() =>
      load(spec.replace('environment: gnn-rapids', 'environment: gnn-rapids-cugraphops')),
    ).not.toThrow();
  });
  it('dependsOn must name an earlier stage', () => {
    const [i] = issuesOf(
      LOCAL_SPEC.replace('    dataset: synth\n', '    dataset: synth\n    dependsOn: [later]\n'),
    );
    expect(i!.message).toBe('"later" is not an earlier stage of this spec');
  });
  it('overrides are checked against the pipeline schema: type and did-you-mean', () => {
    const issues = issuesOf(
      LOCAL_SPEC.replace('training.max_epochs: 2', 'training.max_epochs: two\n      training.lrr: 0.1'),
    );
    expect(issues.map((i) => i.message)).toEqual([
      'training.max_epochs = "two" is not valid for the pipeline',
      'unknown pipeline config key `training.lrr` — did you mean `training.lr`?',
    ]);
    expect(issues[0]!.expected).toBe('an integer >= 1');
  });
  it('a rule across keys of the pipeline (x-requires): novelty_timing needs the payload features', () => {
    const written = (lines: string) =>
      LOCAL_SPEC.replace('training.max_epochs: 2', `training.max_epochs: 2\n      ${lines}`);
    const timing = written('evaluation.scoring: novelty_timing\n      data.features: vehicle_independent');
    const [i, ...rest] = issuesOf(timing);
    expect(rest).toEqual([]);
    expect(i).toMatchObject({
      path: 'stages[0].overrides.evaluation.scoring',
      expected: 'data.features = "payload"',
      found: 'data.features = "vehicle_independent"',
    });
    expect(i!.message).toContain('evaluation.scoring = "novelty_timing" needs data.features = "payload"');
    // the defaults are the pair: another feature set alone is named as the key to fix
    const [d, ...alsoD] = issuesOf(written('data.features: paper'));
    expect(alsoD).toEqual([]);
    expect(d).toMatchObject({ path: 'stages[0].overrides.data.features', found: 'data.features = "paper"' });
    expect(d!.message).toContain(`evaluation.scoring = "novelty_timing" (the pipeline's default) needs`);
    expect(d!.message).toContain('set data.features = "payload", or choose another evaluation.scoring');
    const paper = load(written('data.features: paper\n      evaluation.scoring: gat'));
    expect(paper.resolved.stages[0]!.overrides['evaluation.scoring']).toBe('gat');
    // a sweep point that sets the condition, or breaks the default's, is named as the place to fix, once
    const vi = written('data.features: vehicle_independent');
    const [s, ...others] = issuesOf(`${vi}sweep:\n  grid:\n    evaluation.scoring: [gat, novelty_timing]\n`);
    expect(others).toEqual([]);
    expect(s).toMatchObject({ path: 'sweep.grid.evaluation.scoring', expected: 'data.features = "payload"' });
    const [f, ...alsoF] = issuesOf(`${LOCAL_SPEC}sweep:\n  grid:\n    data.features: [payload, paper]\n`);
    expect(alsoF).toEqual([]);
    expect(f).toMatchObject({ path: 'sweep.grid.data.features', found: 'data.features = "paper"' });
  });
  it("env: a stage's variables are kept; the pipeline's raw-data and cache-root variables are refused with the stage's path", () => {
    const withEnv = (env: string) =>
      LOCAL_SPEC.replace('    dataset: synth\n', `    dataset: synth\n    env:\n${env}`);
    expect(load(withEnv('      WANDB_MODE: offline\n')).resolved.stages[0]!.env).toEqual({
      WANDB_MODE: 'offline',
    });
    const [raw, ...none] = issuesOf(withEnv('      KD_GAT_DATA_ROOT: /tmp/raw\n'));
    expect(none).toEqual([]);
    expect(raw).toMatchObject({
      path: 'stages[0].env.KD_GAT_DATA_ROOT',
      expected: 'no env.KD_GAT_DATA_ROOT',
      found: '"/tmp/raw"',
    });
    expect(raw!.message).toMatch(/raw-data variable, set from the stack's datasets/);
    expect(issuesOf(withEnv('      KD_GAT_CACHE_ROOT: /tmp/c\n'))[0]).toMatchObject({
      path: 'stages[0].env.KD_GAT_CACHE_ROOT',
    });
    expect(issuesOf(withEnv('      SLURM_JOB_ID: "1"\n'))[0]!.message).toMatch(
      /SLURM_\* variables belong to the scheduler/,
    );
  });
  it('shards: only on a preprocess stage, never in a sweep', () => {
    const sharded = LOCAL_SPEC.replace('    dataset: synth\n', '    dataset: synth\n    shards: 4\n');
    expect(sharded).not.toBe(LOCAL_SPEC);
    const [i] = issuesOf(sharded);
    expect(i).toMatchObject({ path: 'stages[0].shards', expected: 'no shards: on this stage', found: '4' });
    expect(i!.message).toMatch(/only a preprocess stage can be sharded .* is curriculum/);
    const preprocess = sharded.replace(/stage: curriculum/, 'stage: preprocess');
    expect(load(preprocess).resolved.stages[0]!.shards).toBe(4);
    const [s] = issuesOf(`${preprocess}sweep:\n  grid:\n    training.lr: [0.1, 0.2]\n`);
    expect(s).toMatchObject({ path: 'stages[0].shards' });
    expect(s!.message).toContain('a sharded stage cannot be part of a sweep');
    expect(issuesOf(preprocess.replace('shards: 4', 'shards: 1'))[0]).toMatchObject({
      path: 'stages[0].shards',
    });
  });
  it('an empty sweep range is rejected', () => {
    const [i] = issuesOf(`${LOCAL_SPEC}sweep:\n  grid:\n    training.lr: []\n`);
    expect(i).toMatchObject({ path: 'sweep.grid.training.lr' });
  });
});

describe('errors a user can act on', () => {
  it('unknown keys get a suggestion and a position', () => {
    const [i] = issuesOf(LOCAL_SPEC.replace('    dataset: synth', '    datset: synth'));
    expect(i!.message).toContain('unknown key `datset` — did you mean `dataset`?');
    expect(i).toMatchObject({ file: 'spec.yaml', line: 9, col: 5 });
  });
  it('an unknown preset suggests the nearest one', () => {
    const [i] = issuesOf(LOCAL_SPEC.replace('cluster: local', 'cluster: osc-pitzr'));
    expect(i!.message).toContain('did you mean `osc-pitzer`?');
    expect(i).toMatchObject({ path: 'cluster', line: 2 });
  });
  it('reports five different mistakes at once, each with its position', () => {
    const bad = LOCAL_SPEC.replace('name: demo', 'name: "bad name"')
      .replace('model: gat', 'model: gcn')
      .replace('    dataset: synth', '    datset: synth')
      .replace('cpus: 2', 'cpus: -1')
      .replace('time: "0:20:00"', 'time: "twenty minutes"');
    const issues = issuesOf(bad);
    expect(issues.map((i) => i.path)).toEqual([
      'name',
      'stages[0].model',
      'stages[0].datset',
      'stages[0].resources.cpus',
      'stages[0].resources.time',
    ]);
    expect(issues.every((i) => i.line !== undefined && i.col !== undefined)).toBe(true);
    const text = (() => {
      try {
        load(bad);
      } catch (e) {
        return (e as Error).message;
      }
    })();
    expect(text).toContain(
      'spec.yaml:7:12: stages[0].model: model gcn is not one of pipeline kdgat\'s (expected one of gat, vgae, found "gcn")',
    );
  });
  it('YAML syntax errors carry their position', () => {
    const [i] = issuesOf('name: [unclosed\n');
    expect(i!.message).toMatch(/^YAML: /);
    expect(i!.line).toBeGreaterThan(0);
  });
});
