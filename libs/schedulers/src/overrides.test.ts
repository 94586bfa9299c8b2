import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isActive, SchedulerError, type SubmitRequest } from './core.ts';
import { LocalScheduler } from './local/index.ts';
import { checkOverrides, exportedVariables, parseOverride } from './overrides.ts';
import { sbatchArgs } from './slurm/index.ts';

const request: SubmitRequest = {
  name: 'exp-train',
  scriptPath: '/r/scripts/train.sbatch',
  cwd: '/r',
  dependsOn: [],
};

describe('submission overrides', () => {
  it('go before the script, after the dependencies, so they win over #SBATCH lines', () => {
    const overrides = ['--exclude=c02,c03', '--mem=16G', '--time=00:20:00', '--array=3,5'];
    expect(sbatchArgs({ ...request, dependsOn: ['11'], overrides }, 'submit')).toEqual([
      '--parsable',
      '--dependency=afterok:11',
      '--kill-on-invalid-dep=yes',
      ...overrides,
      '/r/scripts/train.sbatch',
    ]);
    expect(sbatchArgs({ ...request, overrides: ['--mem=8G'] }, 'test')).toEqual([
      '--test-only',
      '--mem=8G',
      '/r/scripts/train.sbatch',
    ]);
  });

  it('accept only the recovery options, each in its strict form', () => {
    expect(parseOverride('--export=ALL,KD_GAT_OOM_BATCH_SIZE=16')).toEqual({
      name: 'export',
      value: 'ALL,KD_GAT_OOM_BATCH_SIZE=16',
    });
    for (const bad of [
      '--exclude=c02;rm -rf /',
      '--exclude=-c02',
      '--mem=8GB',
      '--mem=0G',
      '--time=20 min',
      '--array=0-9%2',
      '--export=NONE',
      '--export=ALL,PATH=$(id)',
      '--partition=debug',
      '--mem 8G',
    ])
      expect(parseOverride(bad), bad).toHaveProperty('problem');
    expect(() => sbatchArgs({ ...request, overrides: ['--mem=8G', '--exclude=c0 2'] }, 'submit')).toThrow(
      SchedulerError,
    );
    expect(() => checkOverrides({ name: 'x', overrides: ['--qos=high'] })).toThrow(
      /--qos is not an option a submission may override \(expected one of --exclude, --mem, --time, --array, --export\)/,
    );
    expect(exportedVariables('ALL,A=1,B=x/y')).toEqual({ A: '1', B: 'x/y' });
  });
});

describe('the local scheduler with overrides', () => {
  it('runs only the --array tasks, with --export in their environment', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-overrides-'));
    const script = join(dir, 'job.sh');
    writeFileSync(script, `#!/bin/bash\necho "$SLURM_ARRAY_TASK_ID $KD_GAT_X" >> ${join(dir, 'ran.txt')}\n`);
    const scheduler = new LocalScheduler(join(dir, 'sched'));
    const id = await scheduler.submit({
      ...request,
      scriptPath: script,
      cwd: dir,
      array: { size: 4, concurrency: 2 },
      output: join(dir, '%x-%A_%a.out'),
      overrides: ['--array=1,3', '--export=ALL,KD_GAT_X=7', '--exclude=c02', '--mem=1G'],
    });
    let tasks = (await scheduler.query([id])).get(id) ?? [];
    for (let i = 0; i < 200 && tasks.some((t) => isActive(t.state)); i++) {
      await new Promise((r) => setTimeout(r, 100));
      tasks = (await scheduler.query([id])).get(id) ?? [];
    }
    expect(tasks.map((t) => [t.arrayIndex, t.state])).toEqual([
      [1, 'COMPLETED'],
      [3, 'COMPLETED'],
    ]);
    expect(readFileSync(join(dir, 'ran.txt'), 'utf8').trim().split('\n').sort()).toEqual(['1 7', '3 7']);
    await expect(
      scheduler.submit({
        ...request,
        scriptPath: script,
        cwd: dir,
        array: { size: 2, concurrency: 1 },
        overrides: ['--array=5'],
      }),
    ).rejects.toThrow(/--array=5 names task\(s\) 5, expected indices below the array's size 2/);
  }, 30_000);
});
