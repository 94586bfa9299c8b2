import { describe, expect, it } from 'vitest';
import type { Manifest } from '../manifest.ts';
import type { TaskStatus } from '@kdgat/schedulers';
import {
  efficiencyOf,
  formatElapsed,
  formatTable,
  jobStateOf,
  progressOf,
  rememberStates,
  statusLine,
  taskRunRoot,
} from './track.ts';

const t = (state: TaskStatus['state'], arrayIndex?: number): TaskStatus => ({
  jobId: '5',
  state,
  ...(arrayIndex === undefined ? {} : { arrayIndex }),
});

describe('jobStateOf', () => {
  it('is RUNNING while an array has tasks left, and the failure once all ended', () => {
    expect(jobStateOf([t('COMPLETED', 0), t('PENDING', 1)], 2)).toBe('RUNNING');
    expect(jobStateOf([t('COMPLETED', 0), t('FAILED', 1), t('RUNNING', 2)], 3)).toBe('RUNNING');
    expect(jobStateOf([t('COMPLETED', 0), t('FAILED', 1)], 2)).toBe('FAILED');
    expect(jobStateOf([t('COMPLETED', 0), t('COMPLETED', 1)], 2)).toBe('COMPLETED');
    expect(jobStateOf([t('PENDING')], 1)).toBe('PENDING');
    expect(jobStateOf([], 1)).toBe('UNKNOWN');
  });
});

describe('progress', () => {
  const manifest = {
    runDir: '/nonexistent',
    jobs: [
      {
        key: 'train',
        name: 'sw-train',
        stageId: 'train',
        script: 'scripts/train.sbatch',
        dependsOn: [],
        jobId: '5',
        array: { size: 4, concurrency: 2, firstPoint: 0 },
        runRoot: '/r/outputs',
        logs: { output: '/r/logs/%x-%A_%a.out', error: '/r/logs/%x-%A_%a.err' },
      },
    ],
  } as unknown as Manifest;

  it('counts array tasks, including those the scheduler has not listed yet', () => {
    const [p] = progressOf(manifest, new Map([['5', [t('COMPLETED', 0), t('RUNNING', 1)]]]));
    expect(p!.counts).toEqual({ pending: 2, running: 1, done: 1, failed: 0 });
    expect(statusLine(p!)).toBe('train [5] RUNNING 0:00 tasks: 2 pending, 1 running, 1 done, 0 failed');
  });

  it("says which pending tasks the run's throttle holds, and which the site's per-user limit holds", () => {
    const waiting = (arrayIndex: number, reason: string): TaskStatus => ({
      ...t('PENDING', arrayIndex),
      reason,
    });
    const [p] = progressOf(
      manifest,
      new Map([
        [
          '5',
          [
            t('RUNNING', 0),
            waiting(1, 'JobArrayTaskLimit'),
            waiting(2, 'JobArrayTaskLimit'),
            waiting(3, 'QOSMaxJobsPerUserLimit'),
          ],
        ],
      ]),
    );
    expect(statusLine(p!)).toBe(
      "train [5] RUNNING 0:00 tasks: 3 pending, 1 running, 0 done, 0 failed — 2 held by the run's throttle (at most 2 at once); 1 held by the site's per-user limit (QOSMaxJobsPerUserLimit)",
    );
    const chunk = structuredClone(manifest);
    chunk.jobs[0]!.key = 'train.chunk1';
    chunk.jobs[0]!.dependsOn = ['train.chunk0'];
    chunk.jobs[0]!.afterany = ['train.chunk0'];
    const [held] = progressOf(chunk, new Map([['5', [0, 1, 2, 3].map((i) => waiting(i, 'Dependency'))]]));
    expect(statusLine(held!)).toMatch(/PENDING .* — held until train\.chunk0 drains \(the run's throttle\)$/);
  });

  it("finds a sweep task's outputs under point_<firstPoint + i> and a shard task's under shard_<i>", () => {
    const job = { ...manifest.jobs[0]!, array: { size: 4, concurrency: 2, firstPoint: 8 } };
    expect(taskRunRoot(job, 1)).toBe('/r/outputs/point_9');
    expect(taskRunRoot({ ...job, shards: { count: 4, task: true } }, 1)).toBe('/r/outputs/shard_1');
    expect(taskRunRoot({ ...job, array: undefined, shards: { count: 4, task: false } }, undefined)).toBe(
      '/r/outputs',
    );
  });

  it('falls back to the last state it saw once the scheduler forgot the job', () => {
    const m = structuredClone(manifest);
    m.jobs[0]!.lastSeen = {
      state: 'COMPLETED',
      at: 'x',
      tasks: { '0': 'COMPLETED', '1': 'COMPLETED', '2': 'COMPLETED', '3': 'COMPLETED' },
    };
    expect(progressOf(m, new Map())[0]!.state).toBe('COMPLETED');
  });
});

describe('formatting', () => {
  it('formats elapsed times like SLURM', () => {
    expect(formatElapsed(5)).toBe('0:05');
    expect(formatElapsed(3723)).toBe('1:02:03');
  });

  it('prints a table and the triage under it', () => {
    const text = formatTable([
      {
        job: 'train[0]',
        jobId: '6',
        state: 'COMPLETED',
        exitCode: '0:0',
        elapsed: '0:04',
        usage: '-',
        metrics: 'f1=0.9900',
        triage: null,
      },
      {
        job: 'train[1]',
        jobId: '7',
        state: 'TIMEOUT',
        exitCode: '0:15',
        elapsed: '10:00',
        usage: '-',
        metrics: '-',
        triage: { kind: 'TIMEOUT', what: 'hit the limit', fix: 'raise resources.time' },
      },
    ]);
    expect(text.split('\n')[0]).toMatch(/^job\s+job id\s+state\s+exit\s+elapsed\s+metrics$/);
    expect(text).toContain('train[1]: TIMEOUT: hit the limit\n    fix: raise resources.time');
  });
});

describe('accounting of ended tasks', () => {
  const acc = (cpuSeconds: number) => ({
    cpuSeconds,
    maxRssMB: 2027.5,
    elapsedSeconds: 600,
    allocCpus: 8,
    reqMemMB: 16384,
    steps: ['batch', 'extern', '0'],
  });
  const manifest = () =>
    ({
      runDir: '/nonexistent',
      jobs: [
        {
          key: 'train',
          name: 'sw-train',
          stageId: 'train',
          script: 'scripts/train.sbatch',
          dependsOn: [],
          jobId: '5',
          array: { size: 2, concurrency: 2, firstPoint: 0 },
          runRoot: '/r/outputs',
          logs: { output: '/r/logs/%x-%A_%a.out', error: '/r/logs/%x-%A_%a.err' },
        },
      ],
    }) as unknown as Manifest;

  it('keeps the accounting and nodes of ended tasks in the manifest, and shows them once SLURM forgot the job', () => {
    const m = manifest();
    const answer = new Map([
      [
        '5',
        [
          {
            jobId: '5',
            arrayIndex: 0,
            state: 'COMPLETED' as const,
            nodes: ['c01', 'c02'],
            accounting: acc(2398.12),
          },
          { jobId: '5', arrayIndex: 1, state: 'RUNNING' as const, nodes: ['c03'] },
        ],
      ],
    ]);
    rememberStates(m, progressOf(m, answer));
    expect(m.jobs[0]!.lastSeen).toMatchObject({
      state: 'RUNNING',
      tasks: { '0': 'COMPLETED', '1': 'RUNNING' },
      accounting: { '0': acc(2398.12) },
      nodes: { '0': ['c01', 'c02'] },
    });
    const at = m.jobs[0]!.lastSeen!.at;

    // The same answer, then one without sacct's part (it failed this time): nothing changes.
    rememberStates(m, progressOf(m, answer));
    rememberStates(m, progressOf(m, new Map([['5', answer.get('5')!.map(({ accounting: _a, ...t }) => t)]])));
    expect(m.jobs[0]!.lastSeen!.accounting).toEqual({ '0': acc(2398.12) });
    expect(m.jobs[0]!.lastSeen!.at).toBe(at);

    // Forgotten: status reads the manifest's figures.
    const [p] = progressOf(m, new Map());
    expect(p!.tasks.find((t) => t.arrayIndex === 0)).toMatchObject({
      state: 'COMPLETED',
      accounting: acc(2398.12),
      nodes: ['c01', 'c02'],
    });
  });

  it('drops the figures of a task that runs again', () => {
    const m = manifest();
    m.jobs[0]!.lastSeen = {
      state: 'FAILED',
      at: 'x',
      tasks: { '0': 'FAILED' },
      accounting: { '0': acc(10) },
      nodes: { '0': ['c01'] },
    };
    rememberStates(
      m,
      progressOf(m, new Map([['5', [{ jobId: '5', arrayIndex: 0, state: 'PENDING' as const }]]])),
    );
    expect(m.jobs[0]!.lastSeen).not.toHaveProperty('accounting');
    expect(m.jobs[0]!.lastSeen).not.toHaveProperty('nodes');
  });

  it('puts CPU efficiency and peak memory the way seff does', () => {
    expect(efficiencyOf(acc(2400), 2)).toBe('cpu 50% of 8, mem 1.98 GB of 8.00 GB/node (25%)');
    expect(efficiencyOf(acc(2400), 1)).toBe('cpu 50% of 8, mem 1.98 GB of 16.0 GB (12%)');
    expect(efficiencyOf({ ...acc(0), maxRssMB: null })).toBe('cpu 0% of 8, mem -');
  });

  it('adds a usage column only where accounting answered', () => {
    const row = {
      job: 'a',
      jobId: '1',
      state: 'COMPLETED' as const,
      exitCode: '0:0',
      elapsed: '10:00',
      metrics: '-',
      triage: null,
    };
    expect(
      formatTable([{ ...row, usage: 'cpu 50% of 8, mem 1.98 GB of 16.0 GB (12%)' }]).split('\n')[0],
    ).toMatch(/^job\s+job id\s+state\s+exit\s+elapsed\s+usage\s+metrics$/);
    expect(formatTable([{ ...row, usage: '-' }]).split('\n')[0]).not.toContain('usage');
  });
});
