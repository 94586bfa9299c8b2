// The SLURM scheduler against the real one-node cluster: parsers meet real output here.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { preflightPlan, submitPlan, type RenderedJob } from '@kdgat/planning';
import { SlurmScheduler } from '@kdgat/schedulers';
import { waitForJobs } from './helpers.ts';

function script(dir: string, name: string, body: string, directives: string[] = []): string {
  const p = join(dir, name);
  writeFileSync(
    p,
    ['#!/bin/bash', ...directives.map((d) => `#SBATCH ${d}`), 'set -euo pipefail', body, ''].join('\n'),
  );
  return p;
}

describe('slurm scheduler', () => {
  const dir = mkdtempSync(join(tmpdir(), 'runner-slurm-'));
  const slurm = new SlurmScheduler();

  it('reads MaxArraySize from scontrol show config', async () => {
    const { maxArraySize } = await slurm.limits();
    expect(maxArraySize).toBeGreaterThan(1);
  });

  it('runs an afterok chain and a 3-task array; one query reports every task', async () => {
    const order = join(dir, 'order.txt');
    const a = await slurm.submit({
      name: 'e2e-a',
      scriptPath: script(dir, 'a.sh', `sleep 1; echo a >> ${order}`, [
        '--job-name=e2e-a',
        `--output=${dir}/%x-%j.out`,
        '--partition=gpu',
        '--time=2',
      ]),
      cwd: dir,
      dependsOn: [],
    });
    const b = await slurm.submit({
      name: 'e2e-b',
      scriptPath: script(dir, 'b.sh', `echo "b $SLURM_ARRAY_TASK_ID" >> ${order}`, [
        '--job-name=e2e-b',
        `--output=${dir}/%x-%A_%a.out`,
        '--partition=gpu',
        '--time=2',
        // The array is the script's own line, as in every rendered script; sbatch adds only the chain.
        '--array=0-2%1',
      ]),
      cwd: dir,
      dependsOn: [a],
      array: { size: 3, concurrency: 1 },
    });
    const states = await waitForJobs(slurm, [a, b], { expectedTasks: { [b]: 3 } });
    expect(states.get(a)!.map((t) => t.state)).toEqual(['COMPLETED']);
    const tasks = [...states.get(b)!].sort((x, y) => x.arrayIndex! - y.arrayIndex!);
    expect(tasks.map((t) => [t.arrayIndex, t.state, t.exitCode])).toEqual([
      [0, 'COMPLETED', '0:0'],
      [1, 'COMPLETED', '0:0'],
      [2, 'COMPLETED', '0:0'],
    ]);
    expect(new Set(tasks.map((t) => t.taskJobId)).size).toBe(3);
  });

  it('preflight returns the scheduler reason for a request the partition cannot meet', async () => {
    const r = await slurm.preflight({
      name: 'e2e-big',
      scriptPath: script(dir, 'big.sh', 'true', ['--partition=gpu', '--gres=gpu:v100:8', '--time=2']),
      cwd: dir,
      dependsOn: [],
    });
    expect(r.ok).toBe(false);
    expect(r.message).toMatch(/Requested node configuration is not available|Invalid generic resource/i);
  });

  it('a failed sbatch later in a run cancels the parts already queued', async () => {
    const job = (key: string, dependsOn: string[]): RenderedJob => ({
      job: { key, stageId: key, name: `kdgat-e2e-atomic-${key}`, scriptFile: `${key}.sh`, dependsOn },
      script: '',
      runRoot: dir,
      logs: { output: `${dir}/%x-%j.out`, error: `${dir}/%x-%j.err` },
      hints: { cpusPerTask: 1, timeLimit: '2' },
      library: { path: `${dir}/lib/job-x.sh`, sha256: 'c'.repeat(64), source: 'site' },
    });
    script(dir, 'first.sh', 'sleep 30', [
      '--job-name=kdgat-e2e-atomic-first',
      '--partition=gpu',
      '--time=2',
      '--begin=now+1hour',
    ]);
    script(dir, 'second.sh', 'true', ['--partition=gpu', '--time=2']);
    const rendered = [job('first', []), job('second', ['first'])];
    const preflight = await preflightPlan(rendered, dir, slurm);
    expect(preflight.every((r) => r.ok)).toBe(true);
    // The second script disappears between preflight and submission: sbatch refuses it.
    rmSync(join(dir, 'second.sh'));
    const result = await submitPlan(rendered, dir, slurm);
    const first = result.jobIds.get('first')!;
    expect(result.error).toMatch(/sbatch refused kdgat-e2e-atomic-second/);
    expect(result.cancelledAfterFailure).toEqual([first]);
    const state = spawnSync('scontrol', ['show', 'job', '-o', first], { encoding: 'utf8' }).stdout;
    expect(state).toMatch(/JobState=CANCELLED/);
  });
});
