// The SLURM scheduler against the real one-node cluster: parsers meet real output here.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SlurmScheduler } from '../../src/schedulers/slurm/index.ts';
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
      ]),
      cwd: dir,
      dependsOn: [a],
      array: { size: 3, concurrency: 1 },
    });
    const states = await waitForJobs(slurm, [a, b], 120_000, { [b]: 3 });
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
});
