import { describe, expect, it } from 'vitest';
import { record, usage } from '../test-support.ts';
import { verdictsFor } from './verdict.ts';

const base = {
  stageId: 'ae',
  request: { cpus: 8, memGB: 8 },
  requeue: { enabled: true, maxRestarts: 3, leadSeconds: 300 },
};
const codes = (f: { code: string }[]) => f.map((x) => x.code);

describe('verdictsFor', () => {
  it('finds nothing in a healthy run', () => {
    const t = usage(record({ dataWaitFraction: 0.05, gpu: { samples: 10, meanUtil: 80, idleShare: 0.05, peakMemUsedMiB: 1 }, used: { peakRssMB: 6 * 1024 } }));
    expect(verdictsFor({ ...base, tasks: [t] })).toEqual([]);
  });
  it('data-wait above 20%: more loader workers within the cpus, or staging', () => {
    const t = usage(record({ dataWaitFraction: 0.35, used: { peakRssMB: 6 * 1024 } }));
    const f = verdictsFor({ ...base, tasks: [t], numWorkers: 2 });
    expect(codes(f)).toEqual(['DATA_WAIT']);
    expect(f[0]!.fix).toMatch(/data\.num_workers=7 fits the 8 cpus/);
    expect(f[0]!.fix).toMatch(/staging/);
    expect(verdictsFor({ ...base, tasks: [usage(record({ dataWaitFraction: 0.2, used: { peakRssMB: 6 * 1024 } }))] })).toEqual([]);
  });
  it('GPU mostly idle with little data-wait: CPU-bound step', () => {
    const t = usage(record({ dataWaitFraction: 0.02, gpu: { samples: 10, meanUtil: 12, idleShare: 0.7, peakMemUsedMiB: 1 }, used: { peakRssMB: 6 * 1024 } }));
    expect(codes(verdictsFor({ ...base, tasks: [t] }))).toEqual(['CPU_BOUND']);
  });
  it('memory far below the request: the right-sized figure', () => {
    const t = usage(record({ used: { peakRssMB: 1024 } }));
    const f = verdictsFor({ ...base, request: { cpus: 8, memGB: 85 }, tasks: [t], suggestedMemGB: 2 });
    expect(codes(f)).toEqual(['MEMORY_OVER_REQUESTED']);
    expect(f[0]!.fix).toMatch(/memGB: 2/);
  });
  it('time limit hit: the checkpoint/requeue settings', () => {
    const t = usage(record({ state: 'REQUEUED', timeLimitHit: true, used: { peakRssMB: 6 * 1024 } }), record({ restart: 1, used: { peakRssMB: 6 * 1024 } }));
    const f = verdictsFor({ ...base, tasks: [t] });
    expect(codes(f)).toEqual(['TIME_LIMIT']);
    expect(f[0]!.fix).toMatch(/requeue\.maxRestarts/);
    const off = verdictsFor({ ...base, requeue: { enabled: false, maxRestarts: 0, leadSeconds: 0 }, tasks: [t] });
    expect(off[0]!.fix).toMatch(/requeue\.enabled: true/);
  });
});
