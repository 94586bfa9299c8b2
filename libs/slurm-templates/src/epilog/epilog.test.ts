import { existsSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeSandbox, runBash, type Sandbox } from '../test-support/sandbox.ts';
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
      'GPU utilisation:  20 samples: mean 61.0%, p50 50%, p95 100%, idle (< 5%) 20.0% of samples; peak memory.used 2900 MiB',
    );
    expect(r.stdout).toContain('next:             gpu-seff -M pitzer 4242');
    expect(r.stdout).not.toContain('nvidia-smi at job end');
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
