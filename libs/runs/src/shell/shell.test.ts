// `runner shell` before the terminal: its resources (a stage's, the flags', the defaults), what it
// says it charges, the allocation and init it hands the site (a stub salloc here, on a local
// stack), and the input it refuses before the stack is read or anything is allocated.
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import {
  clusterPresets,
  environmentPresets,
  environmentSpecHash,
  loadExperimentSpec,
  readWorkspace,
  WORKSPACE_FILE,
  type ClusterProfile,
} from '@kdgat/config';
import {
  buildPlan,
  estimatePlanCost,
  sizeStages,
  FileStackOutputs,
  type StackOutputsSource,
} from '@kdgat/planning';
import { ddpCostSpec, sampleOutputs } from '@kdgat/planning/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { costLines } from '../cost-lines.ts';
import { UsageError } from '../errors.ts';
import { openShell, type ShellOptions } from './open.ts';
import { SHELL_DEFAULTS, chargeLines, shellResources } from './resources.ts';

/** The tool's own checkout (the runner's REPO_ROOT). */
const REPO_ROOT = resolve(import.meta.dirname, '../../../..');

const pitzer = clusterPresets['osc-pitzer'];
/** The cluster in the box's shape: 2 cores and 6 GB a node; GPU and CPU partitions. */
const box: ClusterProfile = {
  ...clusterPresets.local,
  name: 'kdgat-site',
  scheduler: 'slurm',
  defaultPartition: 'gpu',
  partitions: [
    {
      name: 'gpu',
      gpuType: 'v100',
      gpusPerNode: 1,
      gpuMemGB: 16,
      coresPerNode: 2,
      memPerNodeGB: 6,
      maxWalltime: '7-00:00:00',
    },
    { name: 'cpu', gpusPerNode: 0, gpuMemGB: 0, coresPerNode: 2, memPerNodeGB: 6, maxWalltime: '01:00:00' },
  ],
};

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('not refused');
}

describe('the resources', () => {
  it("without a stage: the profile's default partition, modest requests capped by its nodes, a GPU where it has them", () => {
    expect(shellResources(pitzer, undefined, {}).resources).toEqual({
      cpus: SHELL_DEFAULTS.cpus,
      memGB: SHELL_DEFAULTS.memGB,
      gpus: { count: 1, type: 'v100' },
      nodes: 1,
      ntasksPerNode: 1,
      time: SHELL_DEFAULTS.time,
      partition: 'gpu',
      arrayConcurrency: 1,
    });
    expect(shellResources(box, undefined, { partition: 'cpu' }).resources).toMatchObject({
      cpus: 2,
      memGB: 6,
      gpus: { count: 0 },
      time: '01:00:00',
      partition: 'cpu',
    });
  });

  it("a stage's own, with the flags over them; another partition brings its GPU type", () => {
    const { resolved } = loadExperimentSpec({ text: ddpCostSpec('gpu-quad'), file: 'ddp.yaml' });
    const teacher = resolved.stages[0]!;
    expect(shellResources(pitzer, teacher, {}).resources).toEqual(teacher.resources);
    const moved = shellResources(pitzer, teacher, {
      partition: 'gpu',
      time: '0:30:00',
      memGB: 100,
    }).resources;
    expect(moved).toEqual({ ...teacher.resources, partition: 'gpu', time: '0:30:00', memGB: 100 });
    const ascend = {
      ...pitzer,
      partitions: [...pitzer.partitions, { ...pitzer.partitions[0]!, name: 'a100', gpuType: 'a100' }],
    };
    expect(shellResources(ascend, teacher, { partition: 'a100' }).resources.gpus).toEqual({
      count: 2,
      type: 'a100',
    });
  });

  it('refuses what the partition cannot give, before anything is asked of SLURM', () => {
    expect(refusal(() => shellResources(box, undefined, { partition: 'gpu-quad' }))).toBe(
      '--partition gpu-quad: not a partition of cluster profile kdgat-site; expected one of gpu, cpu',
    );
    expect(refusal(() => shellResources(box, undefined, { cpus: 4 }))).toBe(
      '--cpus 4: 4 cpus x 1 task(s) per node do not fit a node of gpu; expected at most 2',
    );
    expect(refusal(() => shellResources(box, undefined, { memGB: 64 }))).toBe(
      '--mem-gb 64: more than a node of gpu has; expected at most 6',
    );
    expect(refusal(() => shellResources(box, undefined, { partition: 'cpu', gpus: 1 }))).toBe(
      '--gpus 1: more GPUs than a node of cpu has; expected at most 0',
    );
    expect(refusal(() => shellResources(box, undefined, { partition: 'cpu', time: '2:00:00' }))).toBe(
      '--time 2:00:00: longer than cpu allows; expected at most 01:00:00',
    );
    const { resolved } = loadExperimentSpec({ text: ddpCostSpec('gpu-quad'), file: 'ddp.yaml' });
    expect(refusal(() => shellResources(pitzer, resolved.stages[0], { partition: 'gpudebug' }))).toMatch(
      /^resources\.time of stage teacher 8:00:00: longer than gpudebug allows; expected at most 01:00:00$/,
    );
  });
});

describe('what it says it charges', () => {
  it("is plan's figure for the stage (one task), and names the account", () => {
    const { resolved } = loadExperimentSpec({ text: ddpCostSpec('gpu-quad'), file: 'ddp.yaml' });
    const plan = buildPlan({
      experiment: resolved.spec.name,
      specHash: resolved.specHash,
      stages: resolved.stages,
      sweepPoints: resolved.sweepPoints,
      maxArraySize: 1001,
    });
    const none = new Map();
    const sizing = sizeStages(resolved, resolved.stages, none, false);
    const planned = costLines(
      resolved,
      {
        estimate: estimatePlanCost(resolved, sizing.stages, plan, none),
        sizing: sizing.suggested,
        balance: { amount: null, unit: null, note: 'none' },
      },
      { applied: false },
    );
    const figure = / worst \(to the time limit\) (.*); expected/.exec(planned.join('\n'))![1]!;
    expect(figure).toBe('16.00 GPU-h, 104 core-h, 1.75 USD');
    const lines = chargeLines(resolved.cluster, 'teacher', resolved.stages[0]!.resources);
    expect(lines[0]).toContain(
      `13 billed core(s) + 2 GPU(s) on gpu-quad; worst (held to the time limit 8:00:00) ${figure};`,
    );
    expect(lines[1]).toBe('account: PAS1266');
    expect(chargeLines(box, 'gpu', shellResources(box, undefined, {}).resources)[1]).toBe(
      'account: none named (cluster profile kdgat-site names none: SLURM charges your default account)',
    );
  });
});

describe('openShell on a local stack (a stub salloc)', () => {
  let dir: string;
  let bin: string;
  let path: string | undefined;
  let stackFile: string;
  let lines: string[];
  const spec = (staging: boolean) =>
    [
      'name: shell-test',
      'cluster: local',
      'environment: cpu-local',
      ...(staging ? ['staging: { enabled: true }'] : []),
      'stages:',
      '  - { id: preprocess, stage: preprocess, model: gat, scale: small, dataset: synth,',
      '      resources: { cpus: 1, memGB: 3, gpus: { count: 0 }, time: "0:20:00" } }',
      '  - { id: train, stage: autoencoder, model: vgae, scale: small, dataset: synth, dependsOn: [preprocess],',
      '      resources: { cpus: 2, memGB: 4, gpus: { count: 1 }, time: "0:30:00" } }',
      '',
    ].join('\n');

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'runner-shell-'));
    // The test's own workspace: its stacks/ (a shell without a spec reads the profile there).
    writeFileSync(join(dir, WORKSPACE_FILE), 'stacks: stacks\n');
    bin = join(dir, 'bin');
    mkdirSync(bin);
    // salloc as the site would run it: its argv, and a copy of the init the shell reads (--rcfile).
    writeFileSync(
      join(bin, 'salloc'),
      '#!/bin/bash\nprintf "%s\\n" "$@" >"$0.argv"\nwhile [[ $1 != --rcfile ]]; do shift; done\ncp "$2" "$0.init"\n',
      { mode: 0o755 },
    );
    path = process.env['PATH'];
    process.env['PATH'] = `${bin}:${path ?? ''}`;
    stackFile = join(dir, 'stack.json');
    writeFileSync(
      stackFile,
      JSON.stringify({
        profile: 'local',
        connection: { kind: 'local' },
        // One environment, as a stack of one exports it.
        environment: {
          name: 'cpu-local',
          backend: 'venv',
          prefix: '/opt/venv',
          activate: 'source /opt/venv/bin/activate',
          specHash: environmentSpecHash(environmentPresets['cpu-local']),
          lockPath: '/opt/lock.txt',
          lockHash: 'b'.repeat(64),
        },
        scripts: sampleOutputs.scripts,
        scratch: {
          root: join(dir, 'scratch'),
          cacheDirs: { synth: join(dir, 'scratch', 'cache', 'synth') },
          runsDir: join(dir, 'scratch', 'runs'),
          logsDir: join(dir, 'scratch', 'logs'),
        },
      }),
    );
    lines = [];
  });
  afterEach(() => {
    process.env['PATH'] = path;
  });

  /** The options the stub salloc was given, before the interactive step's `srun`. */
  const sallocOptions = (): string[] => {
    const argv = readFileSync(join(bin, 'salloc.argv'), 'utf8').trimEnd().split('\n');
    return argv.slice(0, argv.indexOf('srun'));
  };

  const options = (partial: Partial<ShellOptions> = {}): ShellOptions => ({
    stack: 'local',
    stackSource: new FileStackOutputs(stackFile),
    flags: {},
    scheduler: 'slurm',
    repoRoot: REPO_ROOT,
    configs: { workspace: readWorkspace(dir, 'found'), repoRoot: REPO_ROOT },
    terminal: () => true,
    log: (l) => lines.push(l),
    ...partial,
  });

  it("allocates the stage's resources and hands bash the job's environment and staging; says what it charges first", async () => {
    const file = join(dir, 'spec.yaml');
    writeFileSync(file, spec(true));
    expect(await openShell(options({ specPath: file, stageId: 'train' }))).toBe(0);
    const argv = readFileSync(join(bin, 'salloc.argv'), 'utf8').trimEnd().split('\n');
    const init = argv[argv.indexOf('--rcfile') + 1]!;
    expect(argv).toEqual([
      '--job-name=kdgat-shell-test-train-shell',
      '--partition=gpu',
      '--nodes=1',
      '--ntasks-per-node=1',
      '--cpus-per-task=2',
      '--mem=4G',
      '--gres=gpu:v100:1',
      '--time=0:30:00',
      'srun',
      '--interactive',
      '--preserve-env',
      '--pty',
      'bash',
      '--rcfile',
      init,
      '-i',
    ]);
    // In the user's own directory (mode 700), where nobody else can swap it before salloc reads it.
    const own = join(dir, 'scratch', 'shells', userInfo().username);
    expect(init.startsWith(join(own, 'kdgat-shell-test-train-shell-'))).toBe(true);
    expect(statSync(own).mode & 0o777).toBe(0o700);
    expect(existsSync(init), 'the init is removed when the shell ends').toBe(false);
    const text = readFileSync(join(bin, 'salloc.init'), 'utf8');
    expect(text).toContain(`hpc_stage_datasets=(\n  synth ${join(dir, 'scratch', 'cache', 'synth')}\n)`);
    expect(text).toContain(`hpc_env_target=/opt/venv/bin/activate`);
    expect(text).toContain('hpc_stage_caches() {');
    copyFileSync(join(bin, 'salloc.init'), join(dir, 'init.sh'));
    expect(spawnSync('bash', ['-n', join(dir, 'init.sh')]).status).toBe(0);
    const said = lines.join('\n');
    expect(said).toMatch(
      /^shell: stage train of shell-test \(spec [0-9a-f]{8}\) on stack local, as its job sees it$/m,
    );
    expect(said).toMatch(
      /^charging \(local; .*\): 2 billed core\(s\) \+ 1 GPU\(s\) on gpu; worst \(held to the time limit 0:30:00\) 0\.5000 GPU-h, 1\.00 core-h, 6\.00 SU;/m,
    );
    expect(said).toMatch(/^data: synth \(.*\) staged into the job's \$TMPDIR, as the job stages it$/m);
    expect(said.indexOf('charging')).toBeLessThan(said.indexOf('allocating: salloc'));
  });

  it('refuses an unknown stage, a partition the profile lacks, or no terminal, before the stack is read or anything is allocated', async () => {
    const file = join(dir, 'spec.yaml');
    writeFileSync(file, spec(false));
    const untouched: StackOutputsSource = {
      description: 'a stack that must not be read',
      read: () => Promise.reject(new Error('the stack was read')),
    };
    await expect(
      openShell(options({ specPath: file, stageId: 'trian', stackSource: untouched })),
    ).rejects.toThrow(`--stage trian: spec ${file} has no such stage; expected one of preprocess, train`);
    await expect(openShell(options({ specPath: file, stackSource: untouched }))).rejects.toThrow(
      `--stage: spec ${file} has 2 stages; name one of preprocess, train`,
    );
    await expect(
      openShell(
        options({ specPath: file, stageId: 'train', flags: { partition: 'cpu' }, stackSource: untouched }),
      ),
    ).rejects.toThrow(
      '--partition cpu: not a partition of cluster profile local; expected one of gpu, gpudebug',
    );
    await expect(
      openShell(options({ specPath: file, stageId: 'train', scheduler: undefined })),
    ).rejects.toThrow(
      /runner shell opens a SLURM allocation, and cluster profile local runs jobs with the local scheduler/,
    );
    await expect(
      openShell(options({ specPath: file, stageId: 'train', terminal: () => false })),
    ).rejects.toThrow(
      'runner shell is interactive: run it in a terminal (stdin is not one); nothing was allocated',
    );
    expect(existsSync(join(bin, 'salloc.argv'))).toBe(false);
  });

  it("without a spec: the stack's cluster profile from its configuration, its default partition", async () => {
    mkdirSync(join(dir, 'stacks'));
    writeFileSync(
      join(dir, 'stacks', 'local.yaml'),
      [
        'config:',
        '  kdgat-hpc:cluster: local',
        '  kdgat-hpc:clusterOverrides: { scheduler: slurm }',
        '  kdgat-hpc:environment: cpu-local',
        '  kdgat-hpc:datasets: [synth]',
        '',
      ].join('\n'),
    );
    expect(await openShell(options({ scheduler: undefined, flags: { gpus: 0, time: '0:10:00' } }))).toBe(0);
    expect(sallocOptions()).toEqual([
      '--job-name=kdgat-shell-gpu-shell',
      '--partition=gpu',
      '--nodes=1',
      '--ntasks-per-node=1',
      '--cpus-per-task=2',
      '--mem=8G',
      '--time=0:10:00',
    ]);
    expect(readFileSync(join(bin, 'salloc.init'), 'utf8')).toContain(
      `hpc_cache_root=${join(dir, 'scratch', 'cache')}`,
    );
    expect(lines.join('\n')).toMatch(
      /^shell: no stage: the defaults of cluster profile local on stack local$/m,
    );
  });

  it("--cluster: on another of the site's clusters, salloc -M it, the stage resolved on its profile", async () => {
    const annex: ClusterProfile = {
      ...clusterPresets.local,
      name: 'annex',
      clusterName: 'kdgat-annex',
      defaultPartition: 'gpu',
      partitions: [
        {
          name: 'gpu',
          gpuType: 'a100',
          gpusPerNode: 1,
          gpuMemGB: 40,
          coresPerNode: 4,
          memPerNodeGB: 16,
          maxWalltime: '1-00:00:00',
        },
      ],
      charging: {
        unit: 'SU',
        source: 'illustrative, twice the first cluster',
        wholeNodesWhenMultiNode: true,
        partitions: { gpu: { coreHour: 2, gpuHour: 20 } },
      },
    };
    const stack = JSON.parse(readFileSync(stackFile, 'utf8')) as Record<string, unknown>;
    writeFileSync(stackFile, JSON.stringify({ ...stack, clusters: [annex] }));
    const file = join(dir, 'spec.yaml');
    writeFileSync(file, spec(false));
    // The stack's own cluster by name: no -M; the stage on its v100 partition.
    expect(await openShell(options({ specPath: file, stageId: 'train', cluster: 'local' }))).toBe(0);
    const own = sallocOptions();
    expect(own).toContain('--gres=gpu:v100:1');
    expect(own.filter((o) => o.startsWith('--clusters'))).toEqual([]);
    for (const wanted of ['annex', 'kdgat-annex']) {
      expect(await openShell(options({ specPath: file, stageId: 'train', cluster: wanted }))).toBe(0);
      // -M first, the annex partition's GPU type; every other option as on the stack's own cluster.
      expect(sallocOptions()).toEqual([
        '--clusters=kdgat-annex',
        ...own.map((o) => (o === '--gres=gpu:v100:1' ? '--gres=gpu:a100:1' : o)),
      ]);
    }
    const said = lines.join('\n');
    expect(said).toMatch(/^ {2}cluster: annex \(-M kdgat-annex\), one of the site's clusters$/m);
    // The annex's own rates: 2 cores x 0.5 h x 2 SU + 1 GPU x 0.5 h x 20 SU.
    expect(said).toMatch(/^charging \(annex; illustrative, twice the first cluster\): .* 12\.00 SU;/m);
    await expect(openShell(options({ specPath: file, stageId: 'train', cluster: 'ascend' }))).rejects.toThrow(
      '--cluster ascend: not a cluster of stack local; expected one of local, annex',
    );
    await expect(openShell(options({ specPath: file, stageId: 'train', cluster: 'auto' }))).rejects.toThrow(
      '--cluster auto places a run by its expected start; a shell names its cluster: one of local, annex',
    );
    // The stage asks for more than a node of the annex has: refused, nothing allocated.
    rmSync(join(bin, 'salloc.argv'));
    await expect(
      openShell(options({ specPath: file, stageId: 'train', cluster: 'annex', flags: { cpus: 8 } })),
    ).rejects.toThrow('--cpus 8: 8 cpus x 1 task(s) per node do not fit a node of gpu; expected at most 4');
    expect(existsSync(join(bin, 'salloc.argv'))).toBe(false);
  });
});
