import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildPlan, chunkSweep, orderStages } from './build.ts';

const stage = (id: string, dependsOn: string[] = [], arrayConcurrency = 0) => ({
  id,
  dependsOn,
  resources: { arrayConcurrency },
});

describe('chunkSweep', () => {
  it('keeps a sweep that fits MaxArraySize in one array', () => {
    expect(chunkSweep(1000, 1001)).toEqual([{ firstPoint: 0, size: 1000 }]);
  });

  it('splits past MaxArraySize into arrays that each restart at index 0', () => {
    expect(chunkSweep(2500, 1001)).toEqual([
      { firstPoint: 0, size: 1001 },
      { firstPoint: 1001, size: 1001 },
      { firstPoint: 2002, size: 498 },
    ]);
  });

  it('covers every point exactly once with indices below MaxArraySize', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 1, max: 2000 }), (n, max) => {
        const chunks = chunkSweep(n, max);
        let next = 0;
        for (const c of chunks) {
          expect(c.firstPoint).toBe(next);
          expect(c.size).toBeGreaterThan(0);
          expect(c.size - 1).toBeLessThan(max);
          next += c.size;
        }
        expect(next).toBe(n);
      }),
    );
  });

  it('names the bad value', () => {
    expect(() => chunkSweep(10, 0)).toThrow(/MaxArraySize 0: expected a whole number >= 1/);
  });
});

describe('orderStages', () => {
  it('puts every stage after its dependencies', () => {
    const order = orderStages([
      stage('eval', ['kd']),
      stage('kd', ['cur', 'ae']),
      stage('cur', ['ae']),
      stage('ae'),
    ]);
    expect(order.map((s) => s.id)).toEqual(['ae', 'cur', 'kd', 'eval']);
  });

  it('names a cycle', () => {
    expect(() => orderStages([stage('a', ['b']), stage('b', ['a'])])).toThrow(/cycle: a -> b -> a/);
  });

  it('names an unknown dependency and the stages there are', () => {
    expect(() => orderStages([stage('a', ['zz'])])).toThrow(
      /stage a: dependsOn "zz" names no stage; expected one of a/,
    );
  });
});

describe('buildPlan', () => {
  it('chains stages with afterok edges and no arrays when there is no sweep', () => {
    const plan = buildPlan({
      experiment: 'x',
      specHash: 'h',
      stages: [stage('ae'), stage('cur', ['ae'])],
      sweepPoints: [],
      maxArraySize: 1001,
    });
    expect(plan.jobs).toEqual([
      { key: 'ae', stageId: 'ae', name: 'x-ae', scriptFile: 'scripts/ae.sbatch', dependsOn: [] },
      { key: 'cur', stageId: 'cur', name: 'x-cur', scriptFile: 'scripts/cur.sbatch', dependsOn: ['ae'] },
    ]);
  });

  it('turns a sweep into one array whose task i runs point i', () => {
    const points = [{ 'training.lr': 0.1 }, { 'training.lr': 0.01 }, { 'training.lr': 0.001 }];
    const plan = buildPlan({
      experiment: 'sw',
      specHash: 'h',
      stages: [stage('train', [], 2)],
      sweepPoints: points,
      maxArraySize: 1001,
    });
    expect(plan.jobs).toHaveLength(1);
    expect(plan.jobs[0]!.array).toEqual({ size: 3, concurrency: 2, firstPoint: 0 });
    expect(plan.jobs[0]!.points).toEqual(points);
  });

  it('chunks a sweep over MaxArraySize; chunk k of a later stage waits task by task (aftercorr) on chunk k', () => {
    const points = Array.from({ length: 25 }, (_, i) => ({ seed: i }));
    const plan = buildPlan({
      experiment: 'big',
      specHash: 'h',
      stages: [stage('a'), stage('b', ['a'])],
      sweepPoints: points,
      maxArraySize: 10,
    });
    expect(plan.jobs.map((j) => j.key)).toEqual([
      'a.chunk0',
      'a.chunk1',
      'a.chunk2',
      'b.chunk0',
      'b.chunk1',
      'b.chunk2',
    ]);
    expect(plan.jobs[2]!.array).toEqual({ size: 5, concurrency: 5, firstPoint: 20 });
    expect(plan.jobs[2]!.points![0]).toEqual({ seed: 20 });
    expect(plan.jobs[3]!.dependsOn).toEqual(['a.chunk0']);
    expect(plan.jobs[3]!.aftercorr).toEqual(['a.chunk0']);
    expect(plan.jobs[5]!.aftercorr).toEqual(['a.chunk2']);
    expect(plan.jobs[5]!.points).toEqual(plan.jobs[2]!.points);
    expect(plan.jobs.slice(0, 3).every((j) => j.aftercorr === undefined)).toBe(true);
  });

  it('spreads a sharded stage over an array of shard tasks and a join after them, which later stages wait for', () => {
    const plan = buildPlan({
      experiment: 'pp',
      specHash: 'h',
      stages: [{ ...stage('pre', [], 3), shards: 8 }, stage('ae', ['pre'])],
      sweepPoints: [],
      maxArraySize: 1001,
    });
    expect(plan.jobs).toEqual([
      {
        key: 'pre.shards',
        stageId: 'pre',
        name: 'pp-pre',
        scriptFile: 'scripts/pre.shards.sbatch',
        dependsOn: [],
        array: { size: 8, concurrency: 3, firstPoint: 0 },
        shards: { count: 8, task: true },
      },
      {
        key: 'pre',
        stageId: 'pre',
        name: 'pp-pre',
        scriptFile: 'scripts/pre.sbatch',
        dependsOn: ['pre.shards'],
        shards: { count: 8, task: false },
      },
      { key: 'ae', stageId: 'ae', name: 'pp-ae', scriptFile: 'scripts/ae.sbatch', dependsOn: ['pre'] },
    ]);
  });

  it('refuses more shards than the array may hold, and shards in a sweep', () => {
    const sharded = { ...stage('pre'), shards: 20 };
    expect(() =>
      buildPlan({ experiment: 'x', specHash: 'h', stages: [sharded], sweepPoints: [], maxArraySize: 10 }),
    ).toThrow(/stage pre: 20 shards is more than the cluster's MaxArraySize \(10\): use at most 10/);
    expect(() =>
      buildPlan({
        experiment: 'x',
        specHash: 'h',
        stages: [sharded],
        sweepPoints: [{ seed: 1 }],
        maxArraySize: 99,
      }),
    ).toThrow(/sharded stage cannot be part of a sweep/);
  });
});
