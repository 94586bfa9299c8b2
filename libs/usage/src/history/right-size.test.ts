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
      usage(record({ elapsedSeconds: 600 + i * 60, used: { peakRssMB: mb, cpuSeconds: (600 + i * 60) * 1.5, meanCpus: 1.5 } })),
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
    const s = rightSize({ tasks: [big], runs: 1, current: resources(), partition: pitzerGpu, leadSeconds: 300 });
    expect(s.memGB!.value).toBe(363);
    expect(s.memGB!.basis).toMatch(/capped/);
    expect(s.cpus!.value).toBe(40);
    expect(s.time!.value).toBe('7-00:00:00');
    const small = usage(record({ used: { peakRssMB: 40 * 1024, meanCpus: 1 } }));
    const t = rightSize({ tasks: [small], runs: 1, current: resources(), partition: pitzerGpu, leadSeconds: 0, numWorkers: 2 });
    // 40 GB x 1.25 = 50 GB, billed as ceil(50 / 9.074) = 6 cores on Pitzer: cores up to 6 are free
    expect(t.memGB!.value).toBe(50);
    expect(t.cpus!.value).toBe(6);
    const u = rightSize({ tasks: [usage(record({ used: { peakRssMB: 1024, meanCpus: 1 } }))], runs: 1, current: resources(), partition: localGpu, leadSeconds: 0, numWorkers: 4 });
    expect(u.cpus!.value).toBe(5);
  });

  it('uses only completed tasks, and a requeued task counts all its attempts', () => {
    const failed = usage(record({ state: 'FAILED', used: { peakRssMB: 99999 } }));
    const requeued = usage(
      record({ state: 'REQUEUED', elapsedSeconds: 3600, timeLimitHit: true, signalled: true }),
      record({ restart: 1, elapsedSeconds: 1800 }),
    );
    const s = rightSize({ tasks: [failed, requeued], runs: 1, current: resources(), partition: localGpu, leadSeconds: 0 });
    expect(s.tasks).toBe(1);
    // 5400 s x 1.25 = 6750 s -> 115 min in 5-minute steps
    expect(s.time!.value).toBe('01:55:00');
    expect(s.notes.join(' ')).toMatch(/reached their time limit/);
  });
});
