import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeSandbox, recordedCalls, runBash, type Sandbox } from '../test-support/sandbox.ts';
import { renderEpilog } from './render-epilog.ts';

const profile = { name: 'osc-pitzer', clusterName: 'pitzer', postJobHint: 'gpu-seff -M {cluster} {jobid}' };
const header = 'utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB]';
let sb: Sandbox;
let epilog: string;

beforeEach(() => {
  sb = makeSandbox({ stubs: [] }); // no nvidia-smi on PATH unless a test adds it
  epilog = sb.write('job_epilog.sh', renderEpilog(profile));
});
afterEach(() => sb.cleanup());

describe('job_epilog.sh', () => {
  it('reports job, state, elapsed, peak GPU memory from metrics.json, a utilisation summary and the hint', () => {
    sb.write(
      'run/metrics.json',
      JSON.stringify(
        { stage: 'curriculum', status: 'ok', peak_gpu_mem_mb: 10240.5, scores: { f1: 0.99 } },
        null,
        2,
      ),
    );
    // 20 samples over a restart (second header): util 0 x4, 50 x6, 90 x8, 100 x2; nearest-rank p50 = 10th = 50.
    const rows = [...Array(4).fill(0), ...Array(6).fill(50), ...Array(8).fill(90), ...Array(2).fill(100)].map(
      (u, i) => `${u} %, 10 %, ${1000 + i * 100} MiB, 16384 MiB`,
    );
    sb.write(
      'run/gpu_samples.csv',
      [header, ...rows.slice(0, 10), header, ...rows.slice(10)].join('\n') + '\n',
    );
    const start = Math.floor(Date.now() / 1000) - 3725;
    const r = runBash(epilog, [`${sb.dir}/run`, '0', String(start), 'COMPLETED'], {
      cwd: sb.dir,
      env: sb.env({ SLURM_JOB_ID: '4242', SLURM_ARRAY_JOB_ID: '4240', SLURM_ARRAY_TASK_ID: '2' }),
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('job:              4242 (array task 4240_2) on pitzer');
    expect(r.stdout).toContain('state:            COMPLETED (exit status 0)');
    expect(r.stdout).toMatch(/elapsed: +01:02:0[5-7]/);
    expect(r.stdout).toContain('peak GPU memory:  10240.5 MB');
    expect(r.stdout).toContain(
      'GPU utilisation:  20 samples: mean 61.0%, p50 50%, p95 100%, idle (< 10%) 20.0% of samples; peak memory.used 2900 MiB',
    );
    expect(r.stdout).toContain('next:             gpu-seff -M pitzer 4242');
    expect(r.stdout).not.toContain('nvidia-smi at job end');
  });

  it('appends a machine-readable record per attempt: requested vs used, GPU utilisation, data-wait, time limit', () => {
    sb.write(
      'run/metrics.json',
      JSON.stringify({
        peak_gpu_mem_mb: 2048.5,
        data_wait_fraction: 0.31,
        graphs_per_sec: 950.5,
        peak_cpu_rss_mb: 400,
      }),
    );
    sb.write(
      'run/history.csv',
      'epoch,time,train_loss,val_loss,val_acc,graphs_per_sec,data_wait_fraction,rss_tree_mb,gpu_mem_mb\n0,1,0.5,0.6,,900,0.3,812.5,\n1,2,0.4,0.5,,1000,0.3,1500.2,\n',
    );
    const withTime = `timestamp, ${header}`;
    sb.write(
      'run/gpu_samples.csv',
      [
        withTime,
        '2026/11/23 10:00:00.000, 5 %, 1 %, 100 MiB, 16384 MiB',
        '2026/11/23 10:00:10.000, 85 %, 1 %, 900 MiB, 16384 MiB',
      ].join('\n') + '\n',
    );
    const env = {
      SLURM_JOB_ID: '4242',
      SLURM_ARRAY_JOB_ID: '4240',
      SLURM_ARRAY_TASK_ID: '2',
      SLURM_RESTART_COUNT: '1',
      HPC_RECORD_REQUEST: 'cpus=8 memGB=85 gpus=2 timeSeconds=600 partition=gpu tasks=2',
      HPC_RECORD_STAGE: 'stageId=ae stage=autoencoder model=vgae scale=small dataset=synth',
      HPC_CHILD_CPU_TICKS: String(150 * 100), // getconf CLK_TCK is 100 on Linux
      HPC_SIGNALLED: '1',
    };
    const start = Math.floor(Date.now() / 1000) - 100;
    const r = runBash(epilog, [`${sb.dir}/run`, '75', String(start), 'REQUEUED'], {
      cwd: sb.dir,
      env: sb.env(env),
    });
    expect(r.stdout).toContain(`record:           ${sb.dir}/run/job_record.jsonl`);
    expect(r.stdout).toContain('idle (< 10%) 50.0% of samples');
    runBash(epilog, [`${sb.dir}/run`, '143', String(start - 500), 'TERMINATED'], {
      cwd: sb.dir,
      env: sb.env({ ...env, HPC_SIGNALLED: '' }),
    });
    const lines = readFileSync(`${sb.dir}/run/job_record.jsonl`, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(2);
    const first = JSON.parse(lines[0]!);
    expect(first).toMatchObject({
      schema: 'kdgat-hpc.job-record/1',
      jobId: '4242',
      arrayJobId: '4240',
      arrayTaskId: '2',
      restart: 1,
      stageId: 'ae',
      stage: 'autoencoder',
      model: 'vgae',
      dataset: 'synth',
      state: 'REQUEUED',
      exitStatus: 75,
      // cpus per task, memory per node, GPUs and tasks in the whole job
      requested: { cpus: 8, memGB: 85, gpus: 2, timeSeconds: 600, partition: 'gpu', tasks: 2 },
      used: { cpuSeconds: 150, peakRssSource: 'pipeline', peakGpuMemMB: 2048.5 },
      gpu: { samples: 2, meanUtil: 45, idleShare: 0.5, peakMemUsedMiB: 900 },
      dataWaitFraction: 0.31,
      graphsPerSec: 950.5,
      signalled: true,
      timeLimitHit: true,
    });
    expect(first.elapsedSeconds).toBeGreaterThanOrEqual(100);
    expect(first.used.meanCpus).toBeCloseTo(150 / first.elapsedSeconds, 2);
    // the process tree's peak from history.csv, not the process alone (metrics.json)
    expect(first.used.peakRssMB).toBeCloseTo(1500.2, 1);
    // Killed at the limit (600 s) without the signal: still a time-limit hit.
    expect(JSON.parse(lines[1]!)).toMatchObject({
      state: 'TERMINATED',
      signalled: false,
      timeLimitHit: true,
    });
  });

  it('says so when there are no GPU samples and metrics.json is missing (failed job)', () => {
    sb.write('run/gpu_samples.err', 'NVIDIA-SMI has failed\n');
    const r = runBash(epilog, [`${sb.dir}/run`, '1'], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '77' }) });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('state:            FAILED (exit status 1)');
    expect(r.stdout).toContain('elapsed:          unknown');
    expect(r.stdout).toContain('metrics.json was not written (the pipeline did not finish)');
    expect(r.stdout).toContain('GPU utilisation:  no samples');
  });

  it('reports a CPU run (peak_gpu_mem_mb null) and a header-only sample file', () => {
    sb.write('run/metrics.json', '{"status": "ok", "peak_gpu_mem_mb": null}');
    sb.write('run/gpu_samples.csv', `${header}\n`);
    const r = runBash(epilog, [`${sb.dir}/run`, '0'], { cwd: sb.dir, env: sb.env() });
    expect(r.stdout).toContain('peak GPU memory:  none (the run did not use a GPU)');
    expect(r.stdout).toContain('GPU utilisation:  no samples');
    expect(r.stdout).toContain('next:             gpu-seff -M pitzer unknown');
  });

  it('prints an nvidia-smi snapshot when nvidia-smi exists', () => {
    sb.write('bin/nvidia-smi', "#!/bin/bash\necho 'Tesla V100-PCIE-16GB | 0MiB / 16384MiB'\n", 0o755);
    const r = runBash(epilog, [`${sb.dir}/run`, '0'], { cwd: sb.dir, env: sb.env() });
    expect(r.stdout).toContain('--- nvidia-smi at job end ---\nTesla V100-PCIE-16GB | 0MiB / 16384MiB');
  });

  it("adds the stage's row to the catalogue with the job's final state, unless the pipeline did (not for a requeue)", () => {
    const py = makeSandbox({ stubs: ['python'] });
    try {
      const script = py.write('job_epilog.sh', renderEpilog(profile));
      const start = Math.floor(Date.now() / 1000) - 42;
      const r = runBash(script, [`${py.dir}/run`, '143', String(start), 'TERMINATED'], {
        cwd: py.dir,
        env: py.env({ STUB_CATALOGUE_ANSWER: `${py.dir}/runs/catalogue/ae-run-0123.parquet` }),
      });
      expect(r.status).toBe(0);
      expect(r.stdout).toContain(`catalogue:        ${py.dir}/runs/catalogue/ae-run-0123.parquet`);
      const calls = recordedCalls(py.log, 'python-catalogue');
      expect(calls).toHaveLength(1);
      const argv = calls[0]!;
      expect(argv.slice(0, 7)).toEqual([
        '-m',
        'kdgat',
        'catalogue-append',
        '--stage-dir',
        `${py.dir}/run`,
        '--state',
        'TERMINATED',
      ]);
      expect(argv[7]).toBe('--elapsed');
      expect(Number(argv[8])).toBeGreaterThanOrEqual(42);
      expect(argv[9]).toBe('--unless-recorded');
      // A requeued job ends no stage: no row.
      runBash(script, [`${py.dir}/run`, '75', String(start), 'REQUEUED'], { cwd: py.dir, env: py.env() });
      expect(recordedCalls(py.log, 'python-catalogue')).toHaveLength(1);
      // A catalogue that cannot be written is said, and the epilog still exits 0.
      const failed = runBash(script, [`${py.dir}/run`, '1', String(start), 'FAILED'], {
        cwd: py.dir,
        env: py.env({ STUB_CATALOGUE_STATUS: '1', STUB_CATALOGUE_ANSWER: 'disk full' }),
      });
      expect(failed.status).toBe(0);
      expect(failed.stdout).toContain('catalogue:        no row written: catalogue: disk full');
    } finally {
      py.cleanup();
    }
  });

  it('says the row is not written when the job has no python (the environment was not activated)', () => {
    // Only bash and the tools the epilog needs, none of them a python.
    for (const tool of [
      'bash',
      'awk',
      'sort',
      'date',
      'grep',
      'sed',
      'head',
      'getconf',
      'mkdir',
      'hostname',
      'timeout',
    ])
      if (existsSync(`/usr/bin/${tool}`)) symlinkSync(`/usr/bin/${tool}`, `${sb.bin}/${tool}`);
      else if (existsSync(`/bin/${tool}`)) symlinkSync(`/bin/${tool}`, `${sb.bin}/${tool}`);
    const r = runBash(epilog, [`${sb.dir}/run`, '1'], { cwd: sb.dir, env: sb.env({ PATH: sb.bin }) });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('catalogue:        no row written: no python on PATH');
  });

  it('says the row is not written when no job script named the helpers (HPC_HELPER_MODULE unset)', () => {
    const env = sb.env();
    delete env['HPC_HELPER_MODULE'];
    const r = runBash(epilog, [`${sb.dir}/run`, '1'], { cwd: sb.dir, env });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('catalogue:        no row written: HPC_HELPER_MODULE is not set');
    expect(sb.calls('python-catalogue')).toEqual([]);
  });

  it('prints a hostile post-job hint as text and never runs it', () => {
    const hint = `seff {jobid}; touch ${sb.canary} $(touch ${sb.canary}) \`touch ${sb.canary}\` & {cluster}`;
    const path = sb.write(
      'hostile_epilog.sh',
      renderEpilog({ ...profile, clusterName: 'pitzer', postJobHint: hint }),
    );
    const r = runBash(path, [`${sb.dir}/run`, '0'], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '9' }) });
    expect(r.stdout).toContain(
      `next:             ${hint.replace('{jobid}', '9').replace('{cluster}', 'pitzer')}`,
    );
    expect(existsSync(sb.canary)).toBe(false);
  });
});
