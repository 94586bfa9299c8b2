// Builders for tests: a job record and a task's usage with the fields a test cares about.
import type { Resources } from '@kdgat/config';
import { JOB_RECORD_SCHEMA, taskUsage, type JobRecord, type TaskUsage } from './records/record.ts';

export function record(
  over: Omit<Partial<JobRecord>, 'used'> & { used?: Partial<JobRecord['used']> } = {},
): JobRecord {
  const { used, ...rest } = over;
  return {
    schema: JOB_RECORD_SCHEMA,
    jobId: '100',
    arrayJobId: null,
    arrayTaskId: null,
    restart: 0,
    host: 'node1',
    stageId: 'ae',
    stage: 'autoencoder',
    model: 'vgae',
    scale: 'small',
    dataset: 'synth',
    state: 'COMPLETED',
    exitStatus: 0,
    start: 1000,
    end: 1600,
    elapsedSeconds: 600,
    requested: { cpus: 8, memGB: 85, gpus: 1, timeSeconds: 28800, partition: 'gpu', tasks: 1 },
    used: {
      cpuSeconds: 1200,
      meanCpus: 2,
      peakRssMB: 4096,
      peakRssSource: 'pipeline',
      peakGpuMemMB: null,
      ...used,
    },
    gpu: null,
    dataWaitFraction: 0.05,
    graphsPerSec: 1000,
    signalled: false,
    timeLimitHit: false,
    ...rest,
  };
}

export function usage(...attempts: JobRecord[]): TaskUsage {
  return taskUsage('/runs/x', attempts.length ? attempts : [record()])!;
}

export const pitzerGpu = {
  name: 'gpu',
  gpuType: 'v100',
  gpusPerNode: 2,
  gpuMemGB: 16,
  coresPerNode: 40,
  memPerNodeGB: 363,
  memPerCoreGB: 9.074,
  maxWalltime: '7-00:00:00',
};

export function resources(over: Partial<Resources> = {}): Resources {
  return {
    cpus: 8,
    memGB: 85,
    gpus: { count: 1, type: 'v100' },
    nodes: 1,
    ntasksPerNode: 1,
    time: '8:00:00',
    partition: 'gpu',
    arrayConcurrency: 4,
    ...over,
  };
}
