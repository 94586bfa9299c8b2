import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { localProfile } from '../fixtures.test-support.ts';
import { jobInput, makeSite, writeJob, type SandboxSite } from '../test-support/job-harness.ts';
import { makeSandbox, runBash, runBashSignalled, type Sandbox } from '../test-support/sandbox.ts';

// The rendered job scripts run for real under bash; only python, module, conda, nvidia-smi, scontrol
// and srun are stubs that record their argv.
let sb: Sandbox;
let site: SandboxSite;
beforeEach(() => {
  sb = makeSandbox();
  site = makeSite(sb);
});
afterEach(() => sb.cleanup());

const runDirOf = (root: string) => join(root, 'hcrl_sa', 'vgae_large_autoencoder');

describe('train job script in a sandbox', () => {
  it('loads modules, activates conda, stages, samples GPUs, runs the pipeline and ends with the epilog', () => {
    const input = jobInput(site);
    const script = writeJob(sb, input);
    const r = runBash(script, [], {
      cwd: sb.dir,
      env: sb.env({ SLURM_JOB_ID: '1234', STUB_PYTHON_SLEEP: '0.4' }),
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('module')).toEqual([['load', 'cuda/12.4.1']]);
    expect(sb.calls('conda')).toEqual([['activate', site.env.prefix]]);
    expect(sb.calls('python')).toEqual([
      [
        '-m',
        'kdgat',
        'autoencoder',
        '--model',
        'vgae',
        '--scale',
        'large',
        '--dataset',
        'hcrl_sa',
        '--run-root',
        input.runRoot,
        '-O',
        'training.max_epochs',
        '3',
      ],
    ]);
    const cacheRoot = readFileSync(join(sb.log, readdirCacheRootFile(sb)), 'utf8');
    expect(cacheRoot).toBe(join(sb.tmp, 'hpc-cache'));
    expect(existsSync(join(cacheRoot, 'hcrl_sa', 'graphs.pt'))).toBe(true);
    expect(r.stdout).toMatch(/kdgat-hpc stage: hcrl_sa: 0\.1 MB in 2 file\(s\); copied 2/);
    expect(readFileSync(join(runDirOf(input.runRoot), 'gpu_samples.csv'), 'utf8')).toContain(
      'utilization.gpu [%]',
    );
    expect(r.stdout).toContain('state:            COMPLETED (exit status 0)');
    expect(r.stdout).toContain('peak GPU memory:  2048.5 MB');
    expect(r.stdout).toMatch(/GPU utilisation: +\d+ samples: mean/);
    expect(r.stdout).toContain('next:             gpu-seff -M pitzer 1234');
    expect(sb.calls('scontrol')).toEqual([]);
  });

  it('without TMPDIR stages under /tmp/hpc-job-<id>-<uid> and removes it when the job ends', () => {
    const jobId = `t${process.pid}`;
    const perJob = `/tmp/hpc-job-${jobId}-${process.getuid!()}`;
    try {
      const r = runBash(writeJob(sb, jobInput(site)), [], {
        cwd: sb.dir,
        env: sb.env({ TMPDIR: '', SLURM_JOB_ID: jobId }),
      });
      expect(r.status).toBe(0);
      expect(readFileSync(join(sb.log, readdirCacheRootFile(sb)), 'utf8')).toBe(`${perJob}/hpc-cache`);
      expect(existsSync(perJob)).toBe(false);
    } finally {
      rmSync(perJob, { recursive: true, force: true });
    }
  });

  it('exits with the pipeline status and still runs the epilog when the pipeline fails', () => {
    const r = runBash(writeJob(sb, jobInput(site)), [], {
      cwd: sb.dir,
      env: sb.env({ STUB_PYTHON_MODE: 'fail' }),
    });
    expect(r.status).toBe(3);
    expect(r.stdout).toContain('state:            FAILED (exit status 3)');
    expect(r.stdout).toContain('metrics.json was not written');
  });

  it('a GPU sampler that ignores TERM is killed, and the job still ends with its status and the epilog', () => {
    const r = runBash(writeJob(sb, jobInput(site)), [], {
      cwd: sb.dir,
      // The pipeline runs until the sampler has set itself to ignore TERM (it then writes its pid).
      env: sb.env({
        STUB_NVIDIA_SMI_MODE: 'ignore-term',
        STUB_PYTHON_WAIT_FOR: join(sb.log, 'nvidia-smi.sampler.pid'),
      }),
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(
      /the GPU sampler \(nvidia-smi, pid \d+\) did not end 5 s after TERM: killing it/,
    );
    expect(r.stdout).toContain('state:            COMPLETED (exit status 0)');
    const sampler = Number(readFileSync(join(sb.log, 'nvidia-smi.sampler.pid'), 'utf8'));
    expect(() => process.kill(sampler, 0)).toThrow(/ESRCH/);
  });

  it('fails before the pipeline, with the staging message and the epilog, when the cache is missing', () => {
    const input = jobInput(site, {
      layout: { ...site.layout, cacheDirs: { hcrl_sa: join(sb.dir, 'nowhere') } },
    });
    const r = runBash(writeJob(sb, input), [], { cwd: sb.dir, env: sb.env() });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      `dataset hcrl_sa: source directory '${join(sb.dir, 'nowhere')}' does not exist`,
    );
    expect(r.stdout).toContain('state:            FAILED (exit status 1)');
    expect(sb.calls('python')).toEqual([]);
  });

  it('fails with a clear message when the profile needs modules and the node has no module command', () => {
    rmSync(join(sb.bin, 'module'));
    // The profile's Lmod init does not exist in the sandbox (this machine may have a real one).
    const noInit = {
      ...site.profile,
      modules: { ...site.profile.modules, init: join(sb.dir, 'no-lmod.sh') },
    };
    const r = runBash(writeJob(sb, jobInput(site, { profile: noInit })), [], { cwd: sb.dir, env: sb.env() });
    expect(r.status).toBe(69);
    expect(r.stderr).toContain('cluster profile osc-pitzer loads modules, but there is no module command on');
  });

  describe('requeue handshake', () => {
    it('forwards the signal, and requeues when the pipeline acknowledged and restarts remain', async () => {
      const input = jobInput(site);
      const r = await runBashSignalled(writeJob(sb, input), {
        cwd: sb.dir,
        env: sb.env({ STUB_PYTHON_MODE: 'requeue', SLURM_JOB_ID: '555', SLURM_RESTART_COUNT: '1' }),
        readyFile: join(sb.log, 'python.started'),
        signal: 'SIGUSR1',
      });
      expect(r.stdout).toContain('kdgat-hpc: SIGUSR1: time limit near, asking the pipeline');
      expect(existsSync(join(runDirOf(input.runRoot), 'requeue_ack.json'))).toBe(true);
      expect(r.stdout).toContain('checkpoint acknowledged; requeueing job 555 (restart 2 of 3)');
      expect(sb.calls('scontrol')).toEqual([['requeue', '555']]);
      expect(r.stdout).toContain('state:            REQUEUED (exit status 75)');
      expect(r.status).toBe(75);
    });

    it('does not start the pipeline when the signal came during setup, and requeues', async () => {
      const r = await runBashSignalled(writeJob(sb, jobInput(site)), {
        cwd: sb.dir,
        env: sb.env({ STUB_MODULE_SLEEP: '0.5', SLURM_JOB_ID: '560', SLURM_RESTART_COUNT: '0' }),
        readyFile: join(sb.log, 'module.started'),
        signal: 'SIGUSR1',
      });
      expect(r.stdout).toContain('kdgat-hpc: SIGUSR1 before the pipeline started: nothing to checkpoint');
      expect(r.stdout).toContain('the time limit is near and the pipeline has not started: not starting it');
      expect(sb.calls('python')).toEqual([]);
      expect(sb.calls('scontrol')).toEqual([['requeue', '560']]);
      expect(r.status).toBe(75);
    });

    it('does not requeue once the restart budget is spent, and says why', async () => {
      const r = await runBashSignalled(writeJob(sb, jobInput(site)), {
        cwd: sb.dir,
        env: sb.env({ STUB_PYTHON_MODE: 'requeue', SLURM_JOB_ID: '556', SLURM_RESTART_COUNT: '3' }),
        readyFile: join(sb.log, 'python.started'),
        signal: 'SIGUSR1',
      });
      expect(r.stdout).toContain('kdgat-hpc: not requeueing: restart 3 reached the maximum of 3');
      expect(sb.calls('scontrol')).toEqual([]);
      expect(r.stdout).toContain('state:            FAILED (exit status 75)');
    });

    it('does not requeue on a stale acknowledgement from an earlier attempt', async () => {
      const input = jobInput(site);
      const ack = join(runDirOf(input.runRoot), 'requeue_ack.json');
      sb.write(ack.slice(sb.dir.length + 1), '{"epoch": 1}');
      utimesSync(ack, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000));
      const r = await runBashSignalled(writeJob(sb, input), {
        cwd: sb.dir,
        env: sb.env({ STUB_PYTHON_MODE: 'requeue-without-ack', SLURM_JOB_ID: '557' }),
        readyFile: join(sb.log, 'python.started'),
        signal: 'SIGUSR1',
      });
      expect(r.stdout).toMatch(/not requeueing: .*requeue_ack\.json is older than the signal/);
      expect(sb.calls('scontrol')).toEqual([]);
    });

    it('says so when the pipeline wrote no acknowledgement', async () => {
      const r = await runBashSignalled(writeJob(sb, jobInput(site)), {
        cwd: sb.dir,
        env: sb.env({ STUB_PYTHON_MODE: 'requeue-without-ack', SLURM_JOB_ID: '558' }),
        readyFile: join(sb.log, 'python.started'),
        signal: 'SIGUSR1',
      });
      expect(r.stdout).toContain('kdgat-hpc: not requeueing: the pipeline wrote no acknowledgement');
      expect(r.status).toBe(75);
    });
  });

  it('on SIGTERM (scancel, time limit) stops the pipeline and reports TERMINATED through the epilog', async () => {
    const r = await runBashSignalled(writeJob(sb, jobInput(site)), {
      cwd: sb.dir,
      env: sb.env({ STUB_PYTHON_MODE: 'requeue', SLURM_JOB_ID: '559' }),
      readyFile: join(sb.log, 'python.started'),
      signal: 'SIGTERM',
    });
    expect(r.stderr).toContain(
      'kdgat-hpc: SIGTERM (scancel, or the time limit reached): stopping the pipeline',
    );
    expect(r.stdout).toContain('state:            TERMINATED (exit status 143)');
    expect(r.status).toBe(143);
    expect(sb.calls('scontrol')).toEqual([]);
  });

  it('array task reads its overrides from the table, as data, and runs under point_<i>', () => {
    const tricky = 'a b\tc\nd\\n $(touch CANARY) \'q\' "dq" \\c \\x41 %s ünï';
    const input = jobInput(site, {
      sweepPoints: [
        { 'training.lr': 0.001, 'model.name': 'x' },
        { 'training.lr': 0.01, 'model.name': tricky, 'training.flag': true },
        { 'training.lr': 0.1 },
      ],
      arrayTablePath: join(sb.dir, 'job.array.tsv'),
    });
    const script = writeJob(sb, input);
    const r = runBash(script, [], {
      cwd: sb.dir,
      env: sb.env({ SLURM_JOB_ID: '900', SLURM_ARRAY_JOB_ID: '899', SLURM_ARRAY_TASK_ID: '1' }),
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const argv = sb.calls('python')[0] ?? [];
    expect(argv.slice(9)).toEqual([
      '--run-root',
      join(input.runRoot, 'point_1'),
      '-O',
      'training.max_epochs',
      '3',
      '-O',
      'training.lr',
      '0.01',
      '-O',
      'model.name',
      tricky,
      '-O',
      'training.flag',
      'true',
    ]);
    expect(existsSync(join(sb.dir, 'CANARY'))).toBe(false);
    expect(r.stdout).toContain('job:              900 (array task 899_1)');

    const bad = runBash(script, [], { cwd: sb.dir, env: sb.env({ SLURM_ARRAY_TASK_ID: '3' }) });
    expect(bad.status).toBe(64);
    expect(bad.stderr).toContain("SLURM_ARRAY_TASK_ID='3' is not a task of this array (0-2)");
  });

  it('a chunk of a split sweep runs task i under point_<firstPoint + i>, where the next stage looks', () => {
    const input = jobInput(site, {
      sweepPoints: [{ 'training.seed': 3 }, { 'training.seed': 4 }],
      firstPoint: 3,
      arrayTablePath: join(sb.dir, 'chunk1.array.tsv'),
    });
    const r = runBash(writeJob(sb, input), [], { cwd: sb.dir, env: sb.env({ SLURM_ARRAY_TASK_ID: '1' }) });
    expect(r.status).toBe(0);
    const argv = sb.calls('python')[0] ?? [];
    expect(argv.slice(9, 11)).toEqual(['--run-root', join(input.runRoot, 'point_4')]);
    expect(argv.slice(-2)).toEqual(['training.seed', '4']);
  });

  it('preprocess with staging on writes the cache to scratch and stages nothing (no empty cache, nothing lost in $TMPDIR)', () => {
    const base = jobInput(site);
    const input = jobInput(site, {
      stage: { ...base.stage, id: 'preprocess', stage: 'preprocess' },
      layout: { ...site.layout, cacheDirs: { hcrl_sa: join(site.layout.root, 'cache', 'hcrl_sa') } },
    });
    rmSync(join(site.layout.root, 'cache', 'hcrl_sa'), { recursive: true, force: true });
    const r = runBash(writeJob(sb, input), [], { cwd: sb.dir, env: sb.env() });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(readFileSync(join(sb.log, readdirCacheRootFile(sb)), 'utf8')).toBe(
      join(site.layout.root, 'cache'),
    );
    expect(r.stdout).not.toMatch(/kdgat-hpc stage:/);
  });

  it('a shard task exports its index and the count (run contract) and runs under shard_<i>; the join exports the count alone', () => {
    const base = jobInput(site);
    const preprocess = { ...base.stage, id: 'preprocess', stage: 'preprocess' };
    const layout = { ...site.layout, cacheDirs: { hcrl_sa: join(site.layout.root, 'cache', 'hcrl_sa') } };
    const task = jobInput(site, { stage: preprocess, layout, shards: { count: 3, task: true } });
    const shardOf = () =>
      readFileSync(
        join(
          sb.log,
          readdirSync(sb.log).find((n) => n.endsWith('.shard'))!,
        ),
        'utf8',
      );
    const r = runBash(writeJob(sb, task), [], {
      cwd: sb.dir,
      env: sb.env({ SLURM_JOB_ID: '901', SLURM_ARRAY_JOB_ID: '900', SLURM_ARRAY_TASK_ID: '2' }),
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(shardOf()).toBe('2/3');
    const argv = sb.calls('python')[0] ?? [];
    expect(argv.slice(9, 11)).toEqual(['--run-root', join(task.runRoot, 'shard_2')]);

    const bad = runBash(writeJob(sb, task), [], { cwd: sb.dir, env: sb.env({ SLURM_ARRAY_TASK_ID: '3' }) });
    expect(bad.status).toBe(64);
    expect(bad.stderr).toContain("SLURM_ARRAY_TASK_ID='3' is not a shard of this stage (0-2)");

    rmSync(sb.log, { recursive: true, force: true });
    mkdirSync(sb.log);
    const join_ = jobInput(site, { stage: preprocess, layout, shards: { count: 3, task: false } });
    const j = runBash(writeJob(sb, join_), [], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '902' }) });
    expect(j.status).toBe(0);
    expect(shardOf()).toBe('unset/3');
    expect((sb.calls('python')[0] ?? []).slice(9, 11)).toEqual(['--run-root', join_.runRoot]);
  });

  it('multi-node DDP runs the pipeline through srun', () => {
    const base = jobInput(site);
    const input = jobInput(site, {
      stage: {
        ...base.stage,
        resources: { ...base.stage.resources, nodes: 2, ntasksPerNode: 4, gpus: { count: 4, type: 'v100' } },
      },
    });
    const r = runBash(writeJob(sb, input), [], { cwd: sb.dir, env: sb.env() });
    expect(r.status).toBe(0);
    expect(sb.calls('srun')[0]?.slice(0, 5)).toEqual([
      '--kill-on-bad-exit=1',
      '--cpus-per-task=2',
      'python',
      '-m',
      'kdgat',
    ]);
    expect(sb.calls('python')).toHaveLength(1);
  });

  it('local-executor variant: no modules, venv activation, no requeue without SLURM', () => {
    const local = makeSite(sb, {
      profile: localProfile,
      env: { name: 'cpu-local', backend: 'venv', prefix: join(sb.dir, 'venv') },
      scratchName: 'local-scratch',
    });
    const input = jobInput(local, {
      requeue: { enabled: false, signal: 'USR1', leadSeconds: 60, maxRestarts: 0 },
    });
    const script = writeJob(sb, input, 'local-job.sh');
    expect(readFileSync(script, 'utf8')).not.toMatch(/^#SBATCH/m);
    const r = runBash(script, [], { cwd: sb.dir, env: sb.env({ SLURM_CPUS_PER_TASK: '2' }) });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('module')).toEqual([]);
    expect(readFileSync(join(sb.log, 'venv-activated'), 'utf8')).toBe(
      join(sb.dir, 'venv', 'bin', 'activate'),
    );
    expect(sb.calls('python')).toHaveLength(1);
    expect(r.stdout).toContain('state:            COMPLETED (exit status 0)');
  });
});

describe("an environment's own site modules in a job", () => {
  it("a researcher's uv venv on Pitzer: the CUDA module, the venv's Python module, then its activation", () => {
    const venvSite = makeSite(sb, {
      env: { name: 'tiny-venv', backend: 'venv', prefix: join(sb.dir, 'venv'), modules: ['python/3.12'] },
      scratchName: 'venv-scratch',
    });
    const script = writeJob(sb, jobInput(venvSite), 'venv-job.sh');
    const r = runBash(script, [], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '77' }) });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('module')).toEqual([
      ['load', 'cuda/12.4.1'],
      ['load', 'python/3.12'],
    ]);
    expect(readFileSync(join(sb.log, 'venv-activated'), 'utf8')).toBe(
      join(sb.dir, 'venv', 'bin', 'activate'),
    );
    expect(sb.calls('python')).toHaveLength(1);
  });

  it('a module that cannot be loaded ends the job with status 69 before the pipeline, naming it and the environment', () => {
    // The site's `module` fails for this one name, as Lmod does for an unknown module.
    sb.write(
      'bin/module',
      '#!/bin/bash\nprintf \'%s\\0\' "$@" >"$STUB_LOG/module.$(date +%s%N).argv"\n' +
        '[[ $2 != python/9.99 ]] || { echo "Lmod has detected the following error: unknown module $2" >&2; exit 1; }\n',
      0o755,
    );
    const venvSite = makeSite(sb, {
      env: { name: 'tiny-venv', backend: 'venv', prefix: join(sb.dir, 'venv'), modules: ['python/9.99'] },
      scratchName: 'venv-scratch',
    });
    const script = writeJob(sb, jobInput(venvSite), 'venv-job.sh');
    const r = runBash(script, [], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '78' }) });
    expect(r.status).toBe(69);
    expect(r.stderr).toContain('unknown module python/9.99');
    expect(r.stderr).toContain('kdgat-hpc: environment tiny-venv: module load python/9.99 failed on');
    expect(existsSync(join(sb.log, 'venv-activated'))).toBe(false);
    expect(sb.calls('python')).toEqual([]);
  });
});

describe('site scripts in a sandbox', () => {
  it('train_gpu.sh runs any pipeline command given as arguments, with staging and the epilog', () => {
    const r = runBash(
      join(site.scriptsDir, 'train_gpu.sh'),
      ['curriculum', '--model', 'gat', '--scale', 'small', '--dataset', 'hcrl_sa', '-O', 'kd.alpha', '0.7'],
      {
        cwd: sb.dir,
        env: sb.env({ SLURM_JOB_ID: '31' }),
      },
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('python')).toEqual([
      [
        '-m',
        'kdgat',
        'curriculum',
        '--model',
        'gat',
        '--scale',
        'small',
        '--dataset',
        'hcrl_sa',
        '-O',
        'kd.alpha',
        '0.7',
        '--run-root',
        site.layout.runsDir,
      ],
    ]);
    expect(r.stdout).toContain('kdgat-hpc stage: hcrl_sa:');
    expect(existsSync(join(site.layout.runsDir, 'hcrl_sa', 'gat_small_curriculum', 'metrics.json'))).toBe(
      true,
    );
    expect(r.stdout).toContain('next:             gpu-seff -M pitzer 31');
  });

  it('train_gpu.sh refuses a dataset name that is not a name, before doing anything', () => {
    const r = runBash(
      join(site.scriptsDir, 'train_gpu.sh'),
      ['curriculum', '--model', 'gat', '--scale', 'small', '--dataset', '../x'],
      { cwd: sb.dir, env: sb.env() },
    );
    expect(r.status).toBe(64);
    expect(r.stderr).toContain('kdgat-hpc: ../x is not a stage, model, scale or dataset name');
    expect(sb.calls('python')).toEqual([]);
  });

  it('preprocess_gpu.sh runs the preprocess stage writing the cache to scratch', () => {
    const r = runBash(
      join(site.scriptsDir, 'preprocess_gpu.sh'),
      ['--model', 'vgae', '--scale', 'large', '--dataset', 'hcrl_sa'],
      { cwd: sb.dir, env: sb.env() },
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('python')[0]?.slice(0, 9)).toEqual([
      '-m',
      'kdgat',
      'preprocess',
      '--model',
      'vgae',
      '--scale',
      'large',
      '--dataset',
      'hcrl_sa',
    ]);
    expect(readFileSync(join(sb.log, readdirCacheRootFile(sb)), 'utf8')).toBe(
      join(site.layout.root, 'cache'),
    );
  });
});

function readdirCacheRootFile(s: Sandbox): string {
  const f = readdirSync(s.log).find((n) => n.endsWith('.cache_root'));
  if (!f) throw new Error('python was not run');
  return f;
}
