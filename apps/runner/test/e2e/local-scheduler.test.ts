// The local scheduler runs real bash: dependencies, arrays, emulated SLURM variables, cancel.
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalScheduler } from '@kdgat/schedulers';
import { describeStates, waitFor, waitForJobs } from './helpers.ts';

function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'runner-local-'));
  const script = (name: string, body: string) => {
    const p = join(dir, name);
    writeFileSync(p, `#!/bin/bash\nset -euo pipefail\n${body}\n`);
    return p;
  };
  return { dir, script, scheduler: new LocalScheduler(join(dir, '.local-scheduler')) };
}

describe('local scheduler', () => {
  it('runs a chain in dependency order and an array with SLURM variables emulated', async () => {
    const { dir, script, scheduler } = setup();
    const order = join(dir, 'order.txt');
    const a = await scheduler.submit({
      name: 'first',
      scriptPath: script('a.sh', `sleep 0.5; echo "a $SLURM_JOB_ID" >> ${order}`),
      cwd: dir,
      dependsOn: [],
      output: join(dir, 'logs/%x-%j.out'),
    });
    const b = await scheduler.submit({
      name: 'second',
      scriptPath: script(
        'b.sh',
        `echo "b $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_CPUS_PER_TASK $TMPDIR" >> ${order}; test -d "$TMPDIR"`,
      ),
      cwd: dir,
      dependsOn: [a],
      array: { size: 3, concurrency: 1 },
      cpusPerTask: 1,
      output: join(dir, 'logs/%x-%A_%a.out'),
    });
    const states = await waitForJobs(scheduler, [a, b]);
    expect(states.get(a)!.map((t) => t.state)).toEqual(['COMPLETED']);
    expect(states.get(b)!.map((t) => [t.arrayIndex, t.state])).toEqual([
      [0, 'COMPLETED'],
      [1, 'COMPLETED'],
      [2, 'COMPLETED'],
    ]);
    const lines = readFileSync(order, 'utf8').trim().split('\n');
    expect(lines[0]).toBe(`a ${a}`);
    expect(lines.slice(1).map((l) => l.split(' ').slice(0, 4).join(' '))).toEqual([
      `b ${b} 0 1`,
      `b ${b} 1 1`,
      `b ${b} 2 1`,
    ]);
    expect(lines[1]!.split(' ')[4]).toMatch(/hpc-local-/);
    expect(readFileSync(join(dir, `logs/first-${a}.out`), 'utf8')).toBe('');
  });

  it('aftercorr: task i waits for task i only; a failed task cancels only its counterpart', async () => {
    const { script, dir, scheduler } = setup();
    const a = await scheduler.submit({
      name: 'points',
      scriptPath: script('p.sh', 'if [[ $SLURM_ARRAY_TASK_ID == 1 ]]; then exit 4; fi'),
      cwd: dir,
      dependsOn: [],
      array: { size: 3, concurrency: 3 },
      cpusPerTask: 1,
    });
    const b = await scheduler.submit({
      name: 'next',
      scriptPath: script('n.sh', `touch ${dir}/next.$SLURM_ARRAY_TASK_ID`),
      cwd: dir,
      dependsOn: [],
      aftercorr: [a],
      array: { size: 3, concurrency: 3 },
      cpusPerTask: 1,
    });
    const states = await waitForJobs(scheduler, [a, b]);
    expect(states.get(a)!.map((t) => t.state)).toEqual(['COMPLETED', 'FAILED', 'COMPLETED']);
    const next = states.get(b)!;
    expect(next.map((t) => t.state)).toEqual(['COMPLETED', 'CANCELLED', 'COMPLETED']);
    expect(next[1]!.reason).toBe(`DependencyNeverSatisfied (aftercorr:${a})`);
    expect(
      readdirSync(dir)
        .filter((f) => f.startsWith('next.'))
        .sort(),
    ).toEqual(['next.0', 'next.2']);
  });

  it('afterany: a held chunk starts once the one before ended, even when that one failed', async () => {
    const { script, dir, scheduler } = setup();
    const a = await scheduler.submit({
      name: 'chunk0',
      scriptPath: script('c0.sh', `sleep 1; date +%s%N >${dir}/c0.end; exit 5`),
      cwd: dir,
      dependsOn: [],
      cpusPerTask: 1,
    });
    const b = await scheduler.submit({
      name: 'chunk1',
      scriptPath: script('c1.sh', `date +%s%N >${dir}/c1.start`),
      cwd: dir,
      dependsOn: [],
      afterany: [a],
      cpusPerTask: 1,
    });
    const states = await waitForJobs(scheduler, [a, b]);
    expect(states.get(a)![0]).toMatchObject({ state: 'FAILED' });
    expect(states.get(b)![0]).toMatchObject({ state: 'COMPLETED' });
    const at = (f: string) => BigInt(readFileSync(join(dir, f), 'utf8').trim());
    expect(at('c1.start') >= at('c0.end')).toBe(true);
  });

  it('cancels the dependants of a failed job, and reports the exit code', async () => {
    const { script, dir, scheduler } = setup();
    const a = await scheduler.submit({
      name: 'fails',
      scriptPath: script('f.sh', 'echo boom >&2; exit 3'),
      cwd: dir,
      dependsOn: [],
    });
    const b = await scheduler.submit({
      name: 'after',
      scriptPath: script('g.sh', 'echo never'),
      cwd: dir,
      dependsOn: [a],
    });
    const states = await waitForJobs(scheduler, [a, b]);
    expect(states.get(a)![0]).toMatchObject({ state: 'FAILED', exitCode: '3:0' });
    expect(states.get(b)![0]).toMatchObject({ state: 'CANCELLED' });
    expect(states.get(b)![0]!.reason).toMatch(/DependencyNeverSatisfied/);
  });

  it('cancel stops a running job and its pending dependants', async () => {
    const { script, dir, scheduler } = setup();
    const a = await scheduler.submit({
      name: 'long',
      scriptPath: script('l.sh', 'sleep 60'),
      cwd: dir,
      dependsOn: [],
    });
    const b = await scheduler.submit({
      name: 'next',
      scriptPath: script('n.sh', 'true'),
      cwd: dir,
      dependsOn: [a],
    });
    await waitFor(
      `job ${a} to start`,
      () => scheduler.query([a]),
      (states) => states.get(a)?.[0]?.state === 'RUNNING',
      { intervalMs: 50, describe: (states) => describeStates([a], states) },
    );
    await scheduler.cancel([a, b]);
    const states = await scheduler.query([a, b]);
    expect(states.get(a)![0]!.state).toBe('CANCELLED');
    expect(states.get(b)![0]!.state).toBe('CANCELLED');
  });

  it('enforces the time limit as TIMEOUT, after the pre-timeout signal', async () => {
    const { script, dir, scheduler } = setup();
    const a = await scheduler.submit({
      name: 'slow',
      scriptPath: script('t.sh', `trap 'echo got USR1' USR1\nfor i in $(seq 40); do sleep 0.1; done`),
      cwd: dir,
      dependsOn: [],
      timeLimit: '0:02',
      signal: 'B:USR1@1',
      output: join(dir, 'slow.out'),
    });
    const states = await waitForJobs(scheduler, [a]);
    expect(states.get(a)![0]!.state).toBe('TIMEOUT');
    expect(readFileSync(join(dir, 'slow.out'), 'utf8')).toContain('got USR1');
  });

  it('preflight refuses more CPUs than the machine has, and a script bash cannot parse', async () => {
    const { script, dir, scheduler } = setup();
    const big = await scheduler.preflight({
      name: 'x',
      scriptPath: script('x.sh', 'true'),
      cwd: dir,
      dependsOn: [],
      cpusPerTask: 4096,
    });
    expect(big).toMatchObject({ ok: false });
    expect(big.message).toMatch(/requested 4096 CPUs per task \(--cpus-per-task\); this machine has \d+/);
    const bad = await scheduler.preflight({
      name: 'y',
      scriptPath: script('y.sh', 'if then fi'),
      cwd: dir,
      dependsOn: [],
    });
    expect(bad.ok).toBe(false);
    expect(bad.message).toMatch(/syntax error/);
  });
});
