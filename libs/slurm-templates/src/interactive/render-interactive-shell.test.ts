import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { condaEnv, pitzer, pitzerJob, pitzerLayout, stage, venvEnv } from '../fixtures.test-support.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { renderStageData } from '../stage-data/render-stage-data.ts';
import { bashSyntax, makeSandbox, shellcheck, type Sandbox } from '../test-support/sandbox.ts';
import { renderTrainJob } from '../train-job/render-train-job.ts';
import { renderInteractiveShell, type InteractiveShellInput } from './render-interactive-shell.ts';

const SCRATCH = '/fs/scratch/PAS1266/kd-gat';
const autoencoder = stage({ id: 'autoencoder', stage: 'autoencoder', model: 'vgae' });

function input(partial: Partial<InteractiveShellInput> = {}): InteractiveShellInput {
  return {
    jobName: 'kdgat-hcrl_sa-teacher-autoencoder-shell',
    label: 'autoencoder',
    profile: pitzer,
    resources: autoencoder.resources,
    partition: { gpuType: 'v100' },
    environment: { ...condaEnv, code: `${SCRATCH}/code/0123abcd` },
    data: {
      stage: autoencoder,
      staging: { enabled: true, datasets: ['hcrl_sa'] },
      cacheDirs: pitzerLayout.cacheDirs,
      stageDataScript: `${SCRATCH}/scripts/stage_data.sh`,
    },
    initPath: `${SCRATCH}/shells/autoencoder-1.sh`,
    ...partial,
  };
}

describe('renderInteractiveShell: the allocation', () => {
  it("asks salloc for the job script's resources, then starts SLURM's interactive step with the init", () => {
    const { argv } = renderInteractiveShell(input());
    expect(argv).toEqual([
      'salloc',
      '--job-name=kdgat-hcrl_sa-teacher-autoencoder-shell',
      '--account=PAS1266',
      '--partition=gpu',
      '--nodes=1',
      '--ntasks-per-node=1',
      '--cpus-per-task=10',
      '--mem=85G',
      '--gres=gpu:v100:1',
      '--time=4:00:00',
      'srun',
      '--interactive',
      '--preserve-env',
      '--pty',
      'bash',
      '--rcfile',
      `${SCRATCH}/shells/autoencoder-1.sh`,
      '-i',
    ]);
  });

  it("asks for what the stage's job script asks for, option for option (a DDP stage included)", () => {
    const ddp = stage({
      id: 'ddp',
      stage: 'curriculum',
      model: 'gat',
      resources: { ...autoencoder.resources, nodes: 2, ntasksPerNode: 2, cpus: 4, memGB: 12.5 },
    });
    for (const st of [autoencoder, ddp]) {
      const { script } = renderTrainJob(pitzerJob({ stage: st }));
      const sbatch = script
        .split('\n')
        .filter((l) => l.startsWith('#SBATCH --'))
        .map((l) => l.slice('#SBATCH '.length))
        .filter((o) => /^--(account|partition|nodes|ntasks-per-node|cpus-per-task|mem|gres|time)=/.test(o));
      const { argv } = renderInteractiveShell(input({ resources: st.resources }));
      expect(argv.slice(2, argv.indexOf('srun'))).toEqual(sbatch);
    }
  });

  it("on another cluster of the site: salloc -M that cluster, the allocation's options unchanged", () => {
    const own = renderInteractiveShell(input()).argv;
    const { argv } = renderInteractiveShell(input({ cluster: 'ascend' }));
    expect(argv).toEqual([own[0], '--clusters=ascend', ...own.slice(1)]);
  });

  it('refuses what cannot be asked for, naming the field, the value and what was expected', () => {
    const refusal = (partial: Partial<InteractiveShellInput>) => {
      try {
        renderInteractiveShell(input(partial));
      } catch (e) {
        expect(e).toBeInstanceOf(TemplateInputError);
        return (e as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refusal({ profile: { ...pitzer, account: undefined } })).toMatch(
      /profile\.account.*requires --account/,
    );
    expect(refusal({ resources: { ...autoencoder.resources, time: '4 hours' } })).toMatch(/resources\.time/);
    expect(refusal({ resources: { ...autoencoder.resources, partition: 'gpu;rm' } })).toMatch(
      /resources\.partition/,
    );
    expect(refusal({ jobName: 'two words' })).toMatch(/job name/);
    expect(refusal({ initPath: 'shells/x.sh' })).toMatch(/initPath.*an absolute path/);
    expect(refusal({ cluster: 'ascend --uid=0' })).toMatch(/cluster.*"ascend --uid=0".*a name of/);
  });
});

describe('renderInteractiveShell: the init', () => {
  let sb: Sandbox;
  beforeEach(() => {
    sb = makeSandbox({ stubs: ['module', 'conda'] });
  });
  afterEach(() => sb.cleanup());

  it('parses and passes shellcheck: staging, staging off, preprocess, no stage, conda and venv', () => {
    const cases: Partial<InteractiveShellInput>[] = [
      {},
      { data: { ...input().data!, staging: { enabled: false, datasets: [] } } },
      { data: { ...input().data!, stage: { stage: 'preprocess', dataset: 'hcrl_sa' } } },
      { data: undefined, label: 'gpu' },
      { environment: venvEnv, profile: { ...pitzer, modules: {} } },
    ];
    const files = cases.map((c, i) => sb.write(`init-${i}.sh`, renderInteractiveShell(input(c)).init));
    expect(bashSyntax(files)).toBe('');
    expect(shellcheck(files)).toBe('');
  });

  it('in bash: the environment, the code snapshot first on PYTHONPATH, the stage cached in $TMPDIR, no nounset', () => {
    const cache = join(sb.dir, 'scratch', 'cache', 'hcrl_sa');
    sb.write('scratch/cache/hcrl_sa/graphs.pt', 'graphs');
    sb.write('scratch/cache/hcrl_sa/meta.json', '{}');
    const stageData = sb.write('scripts/stage_data.sh', renderStageData({ parallelCopies: 1, reserveMB: 1 }));
    sb.write('venv/bin/activate', 'export VIRTUAL_ENV=$HOME/venv\n');
    sb.write('code/src/kdgat/__init__.py', '');
    sb.write('.bashrc', 'export FROM_BASHRC=yes\n');
    const { init } = renderInteractiveShell(
      input({
        profile: { ...pitzer, modules: {} },
        environment: { ...venvEnv, prefix: join(sb.dir, 'venv'), code: join(sb.dir, 'code') },
        data: {
          stage: autoencoder,
          staging: { enabled: true, datasets: [] },
          cacheDirs: { hcrl_sa: cache },
          stageDataScript: stageData,
        },
      }),
    );
    const file = sb.write('init.sh', init);
    const r = spawnSync('bash', ['--rcfile', file, '-i'], {
      input: [
        'echo "bashrc=$FROM_BASHRC venv=$VIRTUAL_ENV"',
        'echo "pythonpath=$PYTHONPATH"',
        'echo "cache=$HPC_CACHE_ROOT"',
        'echo "options=$-"',
        'exit',
        '',
      ].join('\n'),
      encoding: 'utf8',
      env: sb.env({ SLURM_JOB_ID: '42', SLURM_JOB_PARTITION: 'gpu' }),
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`bashrc=yes venv=${sb.dir}/venv\n`);
    expect(r.stdout).toContain(`pythonpath=${sb.dir}/code/src\n`);
    expect(r.stdout).toContain(`cache=${sb.tmp}/hpc-cache\n`);
    expect(r.stdout).toMatch(/^options=[^u\n]*$/m);
    expect(r.stdout).toContain(`kdgat-hpc: code from ${sb.dir}/code`);
    expect(r.stdout).toMatch(/kdgat-hpc stage: hcrl_sa: .* -> /);
    expect(r.stdout).toContain(
      `kdgat-hpc shell: job 42 on ${spawnSync('hostname', { encoding: 'utf8' }).stdout.trim()}, partition gpu; TMPDIR=${sb.tmp}; HPC_CACHE_ROOT=${sb.tmp}/hpc-cache`,
    );
    expect(readFileSync(join(sb.tmp, 'hpc-cache', 'hcrl_sa', 'graphs.pt'), 'utf8')).toBe('graphs');
    expect(r.stderr).toContain('(hpc autoencoder) ');
  });

  it("in bash: the environment's own site modules are loaded before its activation", () => {
    sb.write('venv/bin/activate', 'export VIRTUAL_ENV=$HOME/venv\n');
    const { data: _none, ...noStage } = input({
      environment: { ...venvEnv, prefix: join(sb.dir, 'venv'), modules: ['python/3.12'] },
    });
    const { init: rc } = renderInteractiveShell(noStage);
    const file = sb.write('init.sh', rc);
    const r = spawnSync('bash', ['--rcfile', file, '-i'], {
      input: 'echo "venv=$VIRTUAL_ENV"\nexit\n',
      encoding: 'utf8',
      env: sb.env({ SLURM_JOB_ID: '43' }),
    });
    expect(r.status, r.stderr).toBe(0);
    // The profile's CUDA module, then the environment's own, then its activation.
    expect(sb.calls('module')).toEqual([
      ['load', 'cuda/12.4.1'],
      ['load', 'python/3.12'],
    ]);
    expect(r.stdout).toContain(`venv=${sb.dir}/venv\n`);
  });

  it('without staging, points HPC_CACHE_ROOT at the scratch caches and copies nothing', () => {
    const cache = join(sb.dir, 'scratch', 'cache', 'hcrl_sa');
    sb.write('scratch/cache/hcrl_sa/graphs.pt', 'graphs');
    sb.write('venv/bin/activate', '');
    const { init } = renderInteractiveShell(
      input({
        profile: { ...pitzer, modules: {} },
        environment: { ...venvEnv, prefix: join(sb.dir, 'venv') },
        data: {
          stage: autoencoder,
          staging: { enabled: false, datasets: [] },
          cacheDirs: { hcrl_sa: cache },
          cacheRootVariable: 'THEIR_CACHE',
          stageDataScript: '/nowhere/stage_data.sh',
        },
      }),
    );
    const r = spawnSync('bash', ['--rcfile', sb.write('init.sh', init), '-i'], {
      input: 'echo "cache=$HPC_CACHE_ROOT"\necho "theirs=$THEIR_CACHE"\nexit\n',
      encoding: 'utf8',
      env: sb.env(),
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`cache=${join(sb.dir, 'scratch', 'cache')}\n`);
    // The pipeline's own name for it (its declaration's cacheRootVariable), as its job exports it.
    expect(r.stdout).toContain(`theirs=${join(sb.dir, 'scratch', 'cache')}\n`);
    expect(existsSync(join(sb.tmp, 'hpc-cache'))).toBe(false);
  });
});
