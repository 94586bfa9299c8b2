import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadExperimentSpec, type Scalar } from '@kdgat/config';
import { afterAll, describe, expect, it } from 'vitest';
import { buildPlan } from './build.ts';
import { estimatePlanCost, sizeStages, stageHistories } from './cost.ts';
import { ddpCostSpec } from './testing.ts';

const root = mkdtempSync(join(tmpdir(), 'planning-cost-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function costOf(partition: string, runsRoot = join(root, 'empty'), apply = false) {
  const { resolved } = loadExperimentSpec({
    text: ddpCostSpec(partition),
    file: 'ddp.yaml',
  });
  const plan = buildPlan({
    experiment: resolved.spec.name,
    specHash: resolved.specHash,
    stages: resolved.stages,
    sweepPoints: resolved.sweepPoints as Record<string, Scalar>[],
    maxArraySize: 1001,
  });
  const histories = stageHistories(resolved, runsRoot);
  const sizing = sizeStages(resolved, resolved.stages, histories, apply);
  return { resolved, sizing, estimate: estimatePlanCost(resolved, sizing.stages, plan, histories) };
}

describe('the cost of a 2-task job', () => {
  it('bills cpus x tasks per node, and memory with the partition’s own memory per core', () => {
    // gpu: max(2 x 6 = 12, ceil(200 / 9.074) = 23) cores; gpu-quad: max(12, ceil(200 / 15.5) = 13)
    const gpu = costOf('gpu').estimate;
    const quad = costOf('gpu-quad').estimate;
    expect(gpu.stages[0]!.effectiveCoresPerTask).toBe(23);
    expect(quad.stages[0]!.effectiveCoresPerTask).toBe(13);
    // 13 cores x 8 h = 104 core-h x $0.003 + 2 GPUs x 8 h = 16 GPU-h x $0.09 = $1.75
    expect(quad.stages[0]).toMatchObject({ tasks: 1, gpusPerTask: 2, partition: 'gpu-quad' });
    expect(quad.stages[0]!.worst.gpuHours).toBeCloseTo(16);
    expect(quad.stages[0]!.worst.coreHours).toBeCloseTo(104);
    expect(quad.stages[0]!.worst.units).toBeCloseTo(1.752);
    expect(quad.stages[0]!.expected).toBeUndefined();
  });

  it('right-sizes cpus per task from the history of a 2-task job', async () => {
    const runsRoot = join(root, 'runs');
    const runDir = join(runsRoot, 'ddp-cost', '20260101T000000Z-a');
    const pipelineDir = join(runDir, 'outputs', 'hcrl_sa', 'gat_large_curriculum');
    mkdirSync(pipelineDir, { recursive: true });
    const manifest = {
      runDir,
      experiment: 'ddp-cost',
      createdAt: '20260101T000000Z',
      jobs: [{ key: 'teacher', stageId: 'teacher', runRoot: join(runDir, 'outputs') }],
      resolved: {
        stages: [{ id: 'teacher', stage: 'curriculum', model: 'gat', scale: 'large', dataset: 'hcrl_sa' }],
      },
    };
    writeFileSync(join(runDir, 'manifest.json'), JSON.stringify(manifest));
    // 20 cores busy on average over the job (CPU seconds / elapsed), 2 tasks: 10 per task
    const record = {
      schema: 'kdgat-hpc.job-record/1',
      jobId: '7',
      arrayJobId: null,
      arrayTaskId: null,
      restart: 0,
      host: 'p0001',
      stageId: 'teacher',
      stage: 'curriculum',
      model: 'gat',
      scale: 'large',
      dataset: 'hcrl_sa',
      state: 'COMPLETED',
      exitStatus: 0,
      start: 0,
      end: 3600,
      elapsedSeconds: 3600,
      requested: { cpus: 6, memGB: 200, gpus: 2, timeSeconds: 28800, partition: 'gpu-quad', tasks: 2 },
      used: {
        cpuSeconds: 20 * 3600,
        meanCpus: 20,
        peakRssMB: 100 * 1024,
        peakRssSource: 'cgroup',
        peakGpuMemMB: null,
      },
      gpu: null,
      dataWaitFraction: 0.01,
      graphsPerSec: 1000,
      signalled: false,
      timeLimitHit: false,
    };
    writeFileSync(join(pipelineDir, 'job_record.jsonl'), `${JSON.stringify(record)}\n`);
    const { resolved, sizing, estimate } = costOf('gpu-quad', runsRoot, true);
    // 10 per task x 1.25 = 12.5 -> 13 cpus per task: 26 of the node's 48 cores, not 2 x 25
    expect(sizing.suggested['teacher']!.cpus).toMatchObject({ value: 13, current: 6 });
    expect(sizing.stages[0]!.resources).toMatchObject({ cpus: 13, ntasksPerNode: 2, memGB: 125 });
    expect(sizing.rightSized?.['teacher']).toMatchObject({ cpus: 13, memGB: 125, tasks: 1, runs: 1 });
    // the spec is not changed: the sized stages are new
    expect(resolved.stages[0]!.resources).toMatchObject({ cpus: 6, memGB: 200 });
    // the estimate bills what will be asked: max(2 x 13 = 26, ceil(125 / 15.5) = 9)
    expect(estimate.stages[0]!.effectiveCoresPerTask).toBe(26);
    // and the expected case is the median of the finished tasks: 1 h
    expect(estimate.stages[0]!.expected?.secondsPerTask).toBe(3600);
  });
});
