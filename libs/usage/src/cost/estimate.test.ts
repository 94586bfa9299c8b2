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
  it('bills cpus per task x tasks per node: 2 tasks x 12 cpus with 85 GB is 24 cores, not 12', () => {
    expect(
      effectiveCores(
        resources({ cpus: 12, ntasksPerNode: 2, gpus: { count: 2, type: 'v100' } }),
        pitzerGpu,
        true,
      ),
    ).toBe(24);
    // 2 tasks x 4 cpus = 8 cores, but 85 GB is billed as 10
    expect(effectiveCores(resources({ cpus: 4, ntasksPerNode: 2 }), pitzerGpu, true)).toBe(10);
  });
  it('refuses, naming the field, cores per node that do not fit instead of capping them quietly', () => {
    expect(() => effectiveCores(resources({ cpus: 24, ntasksPerNode: 2 }), pitzerGpu, true)).toThrow(
      'resources.cpus: 24 cpus per task x 2 tasks per node = 48 cores do not fit a node of gpu; expected cpus x ntasksPerNode <= 40',
    );
  });
  it("bills memory with the partition's own memory per core: 200 GB on Pitzer gpu-quad is 13 cores (15.5 GB per core)", () => {
    const quad = pitzer.partitions.find((p) => p.name === 'gpu-quad')!;
    const r = resources({
      cpus: 2,
      ntasksPerNode: 4,
      memGB: 200,
      gpus: { count: 4, type: 'v100' },
      partition: 'gpu-quad',
    });
    // 2 cpus x 4 tasks = 8 cores, but ceil(200 / 15.5) = 13 (23 at the gpu nodes' 9.074)
    expect(effectiveCores(r, quad, true)).toBe(13);
    // 363 GB (a whole gpu node) rounds to 41 cores at 9.074 GB per core: billed as the node's 40
    expect(effectiveCores(resources({ memGB: 363 }), pitzerGpu, true)).toBe(40);
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
  it('a 2-task DDP job on gpu-quad is billed for both tasks and the memory: 13 cores x 8 h + 2 GPUs x 8 h', () => {
    const r = resources({
      cpus: 6,
      ntasksPerNode: 2,
      memGB: 200,
      gpus: { count: 2, type: 'v100' },
      partition: 'gpu-quad',
    });
    const e = estimateCost(pitzer, [{ id: 'ddp', tasks: 1, resources: r }]);
    // max(2 x 6 = 12 cores, ceil(200 / 15.5) = 13)
    expect(e.stages[0]!.effectiveCoresPerTask).toBe(13);
    expect(e.worst.coreHours).toBeCloseTo(13 * 8);
    expect(e.worst.gpuHours).toBeCloseTo(2 * 8);
    const cores = estimateCost(pitzer, [{ id: 'ddp', tasks: 1, resources: { ...r, cpus: 10 } }]);
    expect(cores.stages[0]!.effectiveCoresPerTask).toBe(20);
  });
  it('says units are unknown without charging rules, and names a partition that does not exist', () => {
    const { charging: _c, ...bare } = pitzer;
    const e = estimateCost(bare, [{ id: 'ae', tasks: 1, resources: resources() }]);
    expect(e.worst.units).toBeNull();
    expect(formatUnits(e.worst.units, e.unit)).toMatch(/unknown/);
    expect(() =>
      estimateCost(pitzer, [{ id: 'ae', tasks: 1, resources: resources({ partition: 'nope' }) }]),
    ).toThrow(/partition nope/);
  });
});
