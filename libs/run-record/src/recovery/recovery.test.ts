// Failures survived by cause: the decision per cause (pure), its bounds and budget, and the loop
// that queues, records and prints it against a fake scheduler.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SCRIPT_VALUES, clusterPresets } from '@kdgat/config';
import { SUBMIT_OVERRIDES, type Scheduler, type SubmitRequest, type TaskStatus } from '@kdgat/schedulers';
import type { JobRecord } from '@kdgat/usage';
import type { Manifest, ManifestJob } from '../manifest.ts';
import { RunRecord } from '../record.ts';
import { progressOf } from '../track/track.ts';
import { recoverRun } from './apply.ts';
import { decideRecovery, type TaskFacts } from './decide.ts';
import { epochEndsOf, recordOf } from './facts.ts';

const pitzer = clusterPresets['osc-pitzer'];
const gpu = pitzer.partitions.find((p) => p.name === 'gpu')!;

function stage(id: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    stage: 'curriculum',
    model: 'gat',
    scale: 'small',
    dataset: 'synth',
    dependsOn: [],
    overrides: { 'training.max_epochs': 10 },
    resources: {
      cpus: 4,
      memGB: 8,
      gpus: { count: 1 },
      nodes: 1,
      ntasksPerNode: 1,
      time: '01:00:00',
      partition: 'gpu',
      arrayConcurrency: 2,
    },
    ...extra,
  };
}

function job(key: string, jobId: string, extra: Partial<ManifestJob> = {}): ManifestJob {
  return {
    key,
    name: `exp-${key}`,
    stageId: key.split('.')[0]!,
    script: `scripts/${key}.sbatch`,
    dependsOn: [],
    jobId,
    runRoot: '/r/outputs',
    logs: { output: '/r/logs/%x-%j.out', error: '/r/logs/%x-%j.err' },
    ...extra,
  };
}

function manifest(
  jobs: ManifestJob[],
  opts: { budget?: number; maxRecoveries?: number; worst?: number } = {},
): Manifest {
  return {
    version: 1,
    experiment: 'exp',
    runDir: '/r',
    jobs,
    arrayIndex: {},
    resolved: {
      spec: { name: 'exp', ...(opts.budget ? { budget: { maxBillingUnits: opts.budget } } : {}) },
      cluster: pitzer,
      partition: gpu,
      stages: [stage('train'), stage('eval', { dependsOn: ['train'] }), stage('sweep')],
      requeue: {
        enabled: true,
        signal: 'USR1',
        leadSeconds: 300,
        maxRestarts: 3,
        ...(opts.maxRecoveries !== undefined ? { maxRecoveries: opts.maxRecoveries } : {}),
      },
    },
    ...(opts.worst !== undefined ? { cost: { worst: { units: opts.worst } } } : {}),
    submission: { status: 'submitted' },
  } as unknown as Manifest;
}

const NO_FACTS: TaskFacts = { logTail: '', epochEnds: [] };

function states(entries: [string, TaskStatus[]][]): Map<string, TaskStatus[]> {
  return new Map(entries);
}

function jobRecord(over: Omit<Partial<JobRecord>, 'used'> & { used?: Partial<JobRecord['used']> }): JobRecord {
  return {
    schema: 'kdgat-hpc.job-record/1',
    jobId: '100',
    arrayJobId: null,
    arrayTaskId: null,
    restart: 0,
    host: 'p0201',
    stageId: 'train',
    stage: 'curriculum',
    model: 'gat',
    scale: 'small',
    dataset: 'synth',
    state: 'FAILED',
    exitStatus: 1,
    start: 1000,
    end: 2000,
    elapsedSeconds: 1000,
    requested: { cpus: 4, memGB: 8, gpus: 1, timeSeconds: 3600, partition: 'gpu' },
    signalled: false,
    timeLimitHit: false,
    gpu: null,
    dataWaitFraction: null,
    graphsPerSec: null,
    ...over,
    used: {
      cpuSeconds: 1,
      meanCpus: 1,
      peakRssMB: null,
      peakRssSource: 'cgroup',
      peakGpuMemMB: null,
      ...over.used,
    },
  } as JobRecord;
}

function decide(
  m: Manifest,
  s: Map<string, TaskStatus[]>,
  facts: (job: ManifestJob, t: TaskStatus) => TaskFacts = () => NO_FACTS,
) {
  return decideRecovery({ manifest: m, progress: progressOf(m, s), facts });
}

describe('the recovery decision, by cause', () => {
  it('NODE_FAIL: the chain head again excluding the node, its cancelled dependent after it', () => {
    const m = manifest([job('train', '100'), job('eval', '101', { dependsOn: ['train'] })]);
    const plan = decide(
      m,
      states([
        ['100', [{ jobId: '100', state: 'NODE_FAIL', nodes: ['c02'] }]],
        ['101', [{ jobId: '101', state: 'CANCELLED', reason: 'DependencyNeverSatisfied' }]],
      ]),
      () => ({ ...NO_FACTS, epochEnds: [1, 2], checkpoint: true }),
    );
    expect(plan.stops).toEqual([]);
    expect(plan.resubmit.map((r) => [r.key, r.cause, r.options, r.afterokKeys])).toEqual([
      ['train', 'NODE_FAIL', ['--exclude=c02'], []],
      ['eval', 'DEPENDENCY', [], ['train']],
    ]);
    expect(`${plan.resubmit[0]!.head}: resubmitted as 1240 ${plan.resubmit[0]!.what}`).toBe(
      'job train (100, NODE_FAIL on c02): resubmitted as 1240 excluding c02, resuming from checkpoints/last.ckpt',
    );
  });

  it('NODE_FAIL without nodes from the scheduler: the job record of that submission names the host', () => {
    const m = manifest([job('train', '100')]);
    const plan = decide(m, states([['100', [{ jobId: '100', state: 'NODE_FAIL' }]]]), () => ({
      ...NO_FACTS,
      record: jobRecord({ host: 'c07' }),
    }));
    expect(plan.resubmit[0]!.options).toEqual(['--exclude=c07']);
  });

  it('OUT_OF_MEMORY: --mem from the peak, capped at the node, refused over budget', () => {
    const m = manifest([job('train', '100')]);
    const oom = (peakMB: number | null) =>
      decide(
        m,
        states([
          [
            '100',
            [
              {
                jobId: '100',
                state: 'OUT_OF_MEMORY',
                ...(peakMB
                  ? {
                      accounting: {
                        cpuSeconds: 1,
                        maxRssMB: peakMB,
                        elapsedSeconds: 60,
                        allocCpus: 4,
                        reqMemMB: 8192,
                        steps: [],
                      },
                    }
                  : {}),
              },
            ],
          ],
        ]),
      );
    // max(2 x 8, 1.5 x 12 GB) = 18 GB
    expect(oom(12 * 1024).resubmit[0]!.options).toEqual(['--mem=18G']);
    expect(oom(null).resubmit[0]!.options).toEqual(['--mem=16G']);
    // the job record's peak when sacct has none
    const fromRecord = decide(m, states([['100', [{ jobId: '100', state: 'OUT_OF_MEMORY' }]]]), () => ({
      ...NO_FACTS,
      record: jobRecord({ used: { peakRssMB: 20 * 1024 } }),
    }));
    expect(fromRecord.resubmit[0]!.options).toEqual(['--mem=30G']);
    const capped = oom(300 * 1024).resubmit[0]!;
    expect(capped.options).toEqual([`--mem=${gpu.memPerNodeGB}G`]);
    expect(capped.what).toContain(`capped at the gpu node's ${gpu.memPerNodeGB} GB`);
    // already at the node's limit: nothing more to give
    const atLimit = manifest([
      job('train', '100', {
        attempts: [
          {
            jobId: '90',
            state: 'OUT_OF_MEMORY',
            cause: 'OUT_OF_MEMORY',
            action: 'resubmitted',
            options: [`--mem=${gpu.memPerNodeGB}G`],
            resubmittedAs: '100',
            at: '',
            worstUnits: 0,
            note: '',
          },
        ],
      }),
    ]);
    const stop = decide(atLimit, states([['100', [{ jobId: '100', state: 'OUT_OF_MEMORY' }]]])).stops[0]!;
    expect(stop.line).toMatch(/already asks for 363 GB, the gpu node's limit/);
    // over budget: the plan's worst case already fills it
    const tight = manifest([job('train', '100')], { budget: 1, worst: 0.99 });
    const refused = decide(tight, states([['100', [{ jobId: '100', state: 'OUT_OF_MEMORY' }]]]));
    expect(refused.resubmit).toEqual([]);
    expect(refused.stops[0]).toMatchObject({ key: 'train', cause: 'BUDGET' });
    expect(refused.stops[0]!.line).toMatch(/over budget\.maxBillingUnits = 1 USD/);
  });

  it("a CUDA OOM: the pipeline's back-off goes on below the batch it gave up at, memory untouched", () => {
    const m = manifest([job('train', '100')]);
    const tail =
      'ERROR kdgat.training: CUDA out of memory at batch size 16, epoch 3: no retries left\ntorch.OutOfMemoryError: CUDA out of memory.';
    const plan = decide(m, states([['100', [{ jobId: '100', state: 'FAILED', exitCode: '1:0' }]]]), () => ({
      ...NO_FACTS,
      logTail: tail,
    }));
    expect(plan.resubmit[0]!.options).toEqual(['--export=ALL,KD_GAT_OOM_BATCH_SIZE=8']);
    expect(plan.resubmit[0]!.cause).toBe('GPU_OOM');
    const one = decide(m, states([['100', [{ jobId: '100', state: 'FAILED' }]]]), () => ({
      ...NO_FACTS,
      logTail: 'CUDA out of memory at batch size 1, epoch 0: no retries left',
    }));
    expect(one.stops[0]).toMatchObject({ cause: 'GPU_OOM' });
  });

  it('TIMEOUT without the requeue acknowledged: resumed with the time the epochs left need', () => {
    const m = manifest([job('train', '100')]);
    // 4 of 10 epochs, 600 s each: 6 x 600 x 1.25 + 300 start + 300 lead = 5100 s -> 01:25:00 in 5-minute steps
    const ends = [1000, 1600, 2200, 2800];
    const plan = decide(m, states([['100', [{ jobId: '100', state: 'TIMEOUT' }]]]), () => ({
      ...NO_FACTS,
      epochEnds: ends,
      record: jobRecord({ start: 900, signalled: true, timeLimitHit: true }),
    }));
    expect(plan.resubmit[0]!.options).toEqual(['--time=01:25:00']);
    expect(plan.resubmit[0]!.what).toMatch(/6 epoch\(s\) left of 10 at 600 s each/);
    // acknowledged in this submission: the job script's requeue owns it
    const acked = decide(m, states([['100', [{ jobId: '100', state: 'TIMEOUT' }]]]), () => ({
      ...NO_FACTS,
      ackTime: 950,
      record: jobRecord({ start: 900 }),
    }));
    expect(acked.resubmit).toEqual([]);
    expect(acked.stops[0]!.line).toMatch(/requeue was acknowledged/);
  });

  it('FAILED with an ordinary exit status stops with the triage line, and so do its dependents', () => {
    const m = manifest([job('train', '100'), job('eval', '101', { dependsOn: ['train'] })]);
    const plan = decide(
      m,
      states([
        ['100', [{ jobId: '100', state: 'FAILED', exitCode: '1:0' }]],
        ['101', [{ jobId: '101', state: 'CANCELLED', reason: 'DependencyNeverSatisfied' }]],
      ]),
      () => ({ ...NO_FACTS, logTail: 'Traceback (most recent call last):\nValueError: bad value' }),
    );
    expect(plan.resubmit).toEqual([]);
    expect(plan.stops.map((s) => [s.key, s.cause])).toEqual([
      ['train', 'FAILED'],
      ['eval', 'DEPENDENCY'],
    ]);
    expect(plan.stops[0]!.line).toBe(
      'job train (100, FAILED): stopped: FAILED: exited with 1:0: ValueError: bad value\n    fix: read the log (kdgat-runner logs <run>) for the traceback',
    );
  });

  it('bounds the recoveries of a job (requeue.maxRecoveries)', () => {
    const attempt = {
      jobId: '90',
      state: 'NODE_FAIL' as const,
      cause: 'NODE_FAIL',
      action: 'resubmitted' as const,
      options: ['--exclude=c01'],
      resubmittedAs: '100',
      at: '',
      worstUnits: 0,
      note: '',
    };
    const m = manifest([job('train', '100', { attempts: [attempt] })], { maxRecoveries: 1 });
    const plan = decide(m, states([['100', [{ jobId: '100', state: 'NODE_FAIL', nodes: ['c02'] }]]]));
    expect(plan.resubmit).toEqual([]);
    expect(plan.stops[0]).toMatchObject({ cause: 'BOUND' });
    expect(plan.stops[0]!.line).toMatch(/1 recovery already \(requeue\.maxRecoveries = 1\)/);
    // under the default bound (2) the second goes, excluding both nodes
    const again = decide(
      manifest([job('train', '100', { attempts: [attempt] })]),
      states([['100', [{ jobId: '100', state: 'NODE_FAIL', nodes: ['c02'] }]]]),
    );
    expect(again.resubmit[0]!.options).toEqual(['--exclude=c01,c02']);
  });

  it('an array task: only it again (--array), its aftercorr partner after it, the rest kept', () => {
    const sweep = job('sweep', '200', {
      array: { size: 3, concurrency: 2, firstPoint: 0 },
      logs: { output: '/r/logs/%x-%A_%a.out', error: '/r/logs/%x-%A_%a.err' },
    });
    const after = job('eval', '201', {
      stageId: 'eval',
      dependsOn: ['sweep'],
      aftercorr: ['sweep'],
      array: { size: 3, concurrency: 2, firstPoint: 0 },
    });
    const m = manifest([sweep, after]);
    const plan = decide(
      m,
      states([
        [
          '200',
          [0, 1, 2].map((i) => ({
            jobId: '200',
            arrayIndex: i,
            state: i === 1 ? ('NODE_FAIL' as const) : ('COMPLETED' as const),
            nodes: ['c03'],
          })),
        ],
        [
          '201',
          [0, 1, 2].map((i) => ({
            jobId: '201',
            arrayIndex: i,
            state: i === 1 ? ('CANCELLED' as const) : ('COMPLETED' as const),
            ...(i === 1 ? { reason: 'DependencyNeverSatisfied' } : {}),
          })),
        ],
      ]),
    );
    expect(
      plan.resubmit.map((r) => [
        r.key,
        r.tasks,
        r.options,
        r.aftercorrKeys,
        r.earlierTasks.map((t) => t.arrayIndex),
      ]),
    ).toEqual([
      ['sweep', [1], ['--exclude=c03', '--array=1'], [], [0, 2]],
      ['eval', [1], ['--array=1'], ['sweep'], [0, 2]],
    ]);
  });

  it('leaves jobs that still run alone', () => {
    const m = manifest([job('train', '100')]);
    expect(decide(m, states([['100', [{ jobId: '100', state: 'RUNNING' }]]])).active).toEqual(['train']);
  });
});

describe('the facts a decision reads', () => {
  it("finds this submission's job record, and history.csv's epoch times", () => {
    const records = [jobRecord({ jobId: '90', host: 'a' }), jobRecord({ jobId: '100', host: 'b' })];
    expect(recordOf(records, { jobId: '100', state: 'NODE_FAIL' })?.host).toBe('b');
    expect(recordOf(records, { jobId: '101', state: 'NODE_FAIL' })).toBeUndefined();
    expect(epochEndsOf('epoch,time,train_loss\n0,100.5,1\n1,160,0.5\n')).toEqual([100.5, 160]);
  });

  it("the scheduler's time rule is SCRIPT_VALUES.slurmTime", () => {
    expect(SUBMIT_OVERRIDES.time.pattern.source).toBe(SCRIPT_VALUES.slurmTime.pattern.source);
  });
});

/** A scheduler that queues nothing: it hands out ids and keeps the requests. */
function fakeScheduler(firstId = 1240): Scheduler & { requests: SubmitRequest[] } {
  let next = firstId;
  const requests: SubmitRequest[] = [];
  return {
    kind: 'slurm',
    submitCalls: 0,
    requests,
    limits: async () => ({ maxArraySize: 1001 }),
    preflight: async () => ({ ok: true, message: '' }),
    submit: async (r) => {
      requests.push(r);
      return String(next++);
    },
    cancel: async () => {},
    query: async () => new Map(),
  };
}

describe('recoverRun: queued, recorded, said', () => {
  it('resubmits the chain head and its dependent with the new id, and records the attempts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-recover-'));
    const record = RunRecord.create(
      dir,
      manifest([job('train', '100'), job('eval', '101', { dependsOn: ['train'] })]),
    );
    const scheduler = fakeScheduler();
    const lines: string[] = [];
    const progress = progressOf(
      record.manifest,
      states([
        ['100', [{ jobId: '100', state: 'NODE_FAIL', nodes: ['c02'] }]],
        ['101', [{ jobId: '101', state: 'CANCELLED', reason: 'DependencyNeverSatisfied' }]],
      ]),
    );
    const out = await recoverRun({
      record,
      view: record.manifest,
      progress,
      scheduler,
      say: (l) => lines.push(l),
      checkpointsHere: true,
      facts: () => ({ ...NO_FACTS, checkpoint: true }),
      now: () => new Date('2026-11-25T12:00:00Z'),
    });
    expect([...out.resubmitted]).toEqual([
      ['train', '1240'],
      ['eval', '1241'],
    ]);
    expect(scheduler.requests.map((r) => [r.scriptPath, r.dependsOn, r.overrides])).toEqual([
      ['/r/scripts/train.sbatch', [], ['--exclude=c02']],
      ['/r/scripts/eval.sbatch', ['1240'], []],
    ]);
    expect(lines).toEqual([
      'job train (100, NODE_FAIL on c02): resubmitted as 1240 excluding c02, resuming from checkpoints/last.ckpt',
      "job eval (101, CANCELLED: DependencyNeverSatisfied): resubmitted as 1241 after train's resubmission",
    ]);
    const saved = RunRecord.open(dir).manifest.jobs;
    expect(saved[0]).toMatchObject({
      jobId: '1240',
      attempts: [
        {
          jobId: '100',
          state: 'NODE_FAIL',
          cause: 'NODE_FAIL',
          action: 'resubmitted',
          options: ['--exclude=c02'],
          resubmittedAs: '1240',
          at: '2026-11-25T12:00:00.000Z',
        },
      ],
    });
    expect(saved[1]!.attempts![0]).toMatchObject({
      jobId: '101',
      cause: 'DEPENDENCY',
      resubmittedAs: '1241',
    });
  });
});
