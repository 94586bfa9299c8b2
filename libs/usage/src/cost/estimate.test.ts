import { clusterPresets } from '@kdgat/config';
import { describe, expect, it } from 'vitest';
import { pitzerGpu, resources } from '../test-support.ts';
import { effectiveCores, estimateCost, formatUnits } from './estimate.ts';

const pitzer = clusterPresets['osc-pitzer'];

describe('effectiveCores', () => {
  it('bills memory as cores on Pitzer: 85 GB on 8 cpus is 10 cores (9.074 GB per core)', () => {
    expect(effectiveCores(resources(), pitzerGpu, true)).toBe(10);
  });
  it('bills the cores when they are more than the memory needs', () => {
    expect(effectiveCores(resources({ cpus: 20, memGB: 40 }), pitzerGpu, true)).toBe(20);
  });
  it('charges whole nodes for a multi-node job', () => {
    expect(effectiveCores(resources({ nodes: 2 }), pitzerGpu, true)).toBe(80);
    expect(effectiveCores(resources({ nodes: 2 }), pitzerGpu, false)).toBe(20);
  });
  it('falls back to memory per node / cores per node without memPerCoreGB', () => {
    const { memPerCoreGB: _drop, ...p } = pitzerGpu;
    // 363 / 40 = 9.075 GB per core: 85 GB -> 10 cores
    expect(effectiveCores(resources(), p, true)).toBe(10);
  });
});

describe('estimateCost', () => {
  it('worst case: every task to its time limit, in GPU-hours, core-hours and the site unit', () => {
    const e = estimateCost(pitzer, [{ id: 'ae', tasks: 1, resources: resources({ time: '4:00:00' }) }]);
    expect(e.unit).toBe('USD');
    expect(e.stages[0]!.worst.gpuHours).toBeCloseTo(4);
    expect(e.stages[0]!.worst.coreHours).toBeCloseTo(40);
    // 40 core-h x 0.003 + 4 GPU-h x 0.09
    expect(e.worst.units).toBeCloseTo(0.48);
    expect(e.expectedFromHistory).toEqual([]);
    expect(e.expected).toEqual(e.worst);
  });
  it('a 12-point sweep costs 12 tasks; expected comes from history, capped at the limit', () => {
    const e = estimateCost(pitzer, [
      { id: 'sweep', tasks: 12, resources: resources({ time: '1:00:00' }), expectedSecondsPerTask: 900 },
      { id: 'eval', tasks: 1, resources: resources({ time: '1:00:00' }), expectedSecondsPerTask: 99999 },
    ]);
    expect(e.stages[0]!.worst.gpuHours).toBeCloseTo(12);
    expect(e.stages[0]!.expected!.gpuHours).toBeCloseTo(3);
    expect(e.stages[1]!.expected!.secondsPerTask).toBe(3600);
    expect(e.expected.gpuHours).toBeCloseTo(4);
    expect(e.expectedFromHistory).toEqual(['sweep', 'eval']);
  });
  it('says units are unknown without charging rules, and names a partition that does not exist', () => {
    const { charging: _c, ...bare } = pitzer;
    const e = estimateCost(bare, [{ id: 'ae', tasks: 1, resources: resources() }]);
    expect(e.worst.units).toBeNull();
    expect(formatUnits(e.worst.units, e.unit)).toMatch(/unknown/);
    expect(() => estimateCost(pitzer, [{ id: 'ae', tasks: 1, resources: resources({ partition: 'nope' }) }])).toThrow(
      /partition nope/,
    );
  });
});
