import { describe, expect, it } from 'vitest';
import { pitzerGpu, record, resources, usage } from '../test-support.ts';
import { applyRightSizing, percentile, rightSize } from './right-size.ts';

const localGpu = { ...pitzerGpu, memPerCoreGB: undefined, coresPerNode: 64, memPerNodeGB: 256 };

describe('percentile', () => {
  it('is the nearest rank', () => {
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.95)).toBe(10);
    expect(percentile([5, 1, 3], 0.5)).toBe(3);
  });
});

describe('rightSize', () => {
  it('with no history keeps the spec and says so', () => {
    const s = rightSize({ tasks: [], runs: 0, current: resources(), partition: localGpu, leadSeconds: 300 });
    expect(s.cpus).toBeUndefined();
    expect(s.notes).toEqual(['no history for this stage: the spec is kept']);
  });

  it('sizes memory, cpus and time from finished tasks: percentile x margin, never below the max', () => {
    const tasks = [2048, 3072, 4096].map((mb, i) =>
      usage(
        record({
          elapsedSeconds: 600 + i * 60,
          used: { peakRssMB: mb, cpuSeconds: (600 + i * 60) * 1.5, meanCpus: 1.5 },
        }),
      ),
    );
    const s = rightSize({ tasks, runs: 2, current: resources(), partition: localGpu, leadSeconds: 300 });
    expect(s.tasks).toBe(3);
    expect(s.runs).toBe(2);
    // p95 of 2, 3, 4 GB = 4 GB; x 1.25 = 5 GB
    expect(s.memGB).toMatchObject({ value: 5, current: 85 });
    // 1.5 cores x 1.25 = 1.875 -> 2
    expect(s.cpus!.value).toBe(2);
    // 720 s x 1.25 = 900 s + 300 s lead = 1200 s = 20 min
    expect(s.time!.value).toBe('00:20:00');
    expect(applyRightSizing(resources(), s)).toMatchObject({ cpus: 2, memGB: 5, time: '00:20:00' });
  });

  it('never goes below the largest peak (one outlier above the percentile)', () => {
    const tasks = [...Array(30).fill(1024), 20480].map((mb) => usage(record({ used: { peakRssMB: mb } })));
    const s = rightSize({ tasks, runs: 1, current: resources(), partition: localGpu, leadSeconds: 0 });
    expect(s.memGB!.value).toBe(20);
  });

  it('never goes above the partition, and raises cpus to data.num_workers + 1 and to the cores memory is billed as', () => {
    const big = usage(record({ elapsedSeconds: 8 * 86400, used: { peakRssMB: 400 * 1024, meanCpus: 50 } }));
    const s = rightSize({
      tasks: [big],
      runs: 1,
      current: resources(),
      partition: pitzerGpu,
      leadSeconds: 300,
    });
    expect(s.memGB!.value).toBe(363);
    expect(s.memGB!.basis).toMatch(/capped/);
    expect(s.cpus!.value).toBe(40);
    expect(s.time!.value).toBe('7-00:00:00');
    const small = usage(record({ used: { peakRssMB: 40 * 1024, meanCpus: 1 } }));
    const t = rightSize({
      tasks: [small],
      runs: 1,
      current: resources(),
      partition: pitzerGpu,
      leadSeconds: 0,
      numWorkers: 2,
    });
    // 40 GB x 1.25 = 50 GB, billed as ceil(50 / 9.074) = 6 cores on Pitzer: cores up to 6 are free
    expect(t.memGB!.value).toBe(50);
    expect(t.cpus!.value).toBe(6);
    const u = rightSize({
      tasks: [usage(record({ used: { peakRssMB: 1024, meanCpus: 1 } }))],
      runs: 1,
      current: resources(),
      partition: localGpu,
      leadSeconds: 0,
      numWorkers: 4,
    });
    expect(u.cpus!.value).toBe(5);
  });

  it("sizes cpus per task from a 2-task record: the job's cores busy divided by its tasks", () => {
    const twoTasks = (meanCpus: number, tasks: number | null) =>
      usage(
        record({
          requested: { cpus: 8, memGB: 85, gpus: 2, timeSeconds: 28800, partition: 'gpu', tasks },
          used: { peakRssMB: 4096, cpuSeconds: meanCpus * 600 },
        }),
      );
    const ddp = resources({ gpus: { count: 2, type: 'v100' }, ntasksPerNode: 2 });
    // 12 cores busy (CPU seconds / elapsed) over 2 tasks = 6 per task; x 1.25 = 7.5 -> 8 cpus per task (16 on the node)
    const s = rightSize({
      tasks: [twoTasks(12, 2)],
      runs: 1,
      current: ddp,
      partition: localGpu,
      leadSeconds: 0,
    });
    expect(s.cpus).toMatchObject({ value: 8, current: 8 });
    expect(s.cpus!.basis).toMatch(/^cores busy on average per task p95 6\.00/);
    // a record from before `requested.tasks` counts as one task: 12 cores -> 15 cpus
    expect(
      rightSize({
        tasks: [twoTasks(12, null)],
        runs: 1,
        current: resources(),
        partition: localGpu,
        leadSeconds: 0,
      }).cpus!.value,
    ).toBe(15);
  });

  it('with 2 tasks per node, caps cpus per task at half the node and shares the cores memory is billed as', () => {
    const ddp = resources({ gpus: { count: 2, type: 'v100' }, ntasksPerNode: 2 });
    const busy = usage(
      record({
        requested: { cpus: 20, memGB: 85, gpus: 2, timeSeconds: 28800, partition: 'gpu', tasks: 2 },
        used: { peakRssMB: 1024, cpuSeconds: 60 * 600 },
      }),
    );
    const s = rightSize({ tasks: [busy], runs: 1, current: ddp, partition: pitzerGpu, leadSeconds: 0 });
    // 30 per task x 1.25 = 38, but 2 tasks x 20 fill the 40-core node
    expect(s.cpus!.value).toBe(20);
    expect(s.cpus!.basis).toContain('capped at 20 per task (40 cores / 2 tasks per node)');
    // 160 GB x 1.25 = 200 GB, billed as ceil(200 / 9.074) = 23 cores: 11 per task cost nothing more
    const big = usage(
      record({
        requested: { cpus: 2, memGB: 200, gpus: 2, timeSeconds: 28800, partition: 'gpu', tasks: 2 },
        used: { peakRssMB: 160 * 1024, cpuSeconds: 2 * 600 },
      }),
    );
    const t = rightSize({ tasks: [big], runs: 1, current: ddp, partition: pitzerGpu, leadSeconds: 0 });
    expect(t.memGB!.value).toBe(200);
    expect(t.cpus!.value).toBe(11);
    expect(t.cpus!.basis).toContain('the 23 cores 200 GB is billed as on gpu shared by 2 tasks');
  });

  it('uses only completed tasks, and a requeued task counts all its attempts', () => {
    const failed = usage(record({ state: 'FAILED', used: { peakRssMB: 99999 } }));
    const requeued = usage(
      record({ state: 'REQUEUED', elapsedSeconds: 3600, timeLimitHit: true, signalled: true }),
      record({ restart: 1, elapsedSeconds: 1800 }),
    );
    const s = rightSize({
      tasks: [failed, requeued],
      runs: 1,
      current: resources(),
      partition: localGpu,
      leadSeconds: 0,
    });
    expect(s.tasks).toBe(1);
    // 5400 s x 1.25 = 6750 s -> 115 min in 5-minute steps
    expect(s.time!.value).toBe('01:55:00');
    expect(s.notes.join(' ')).toMatch(/reached their time limit/);
  });
});
