import { describe, expect, it } from 'vitest';
import type { Manifest } from '../manifest.ts';
import type { TaskStatus } from '@kdgat/schedulers';
import { formatElapsed, formatTable, jobStateOf, progressOf, statusLine } from './track.ts';

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
        metrics: 'f1=0.9900',
        triage: null,
      },
      {
        job: 'train[1]',
        jobId: '7',
        state: 'TIMEOUT',
        exitCode: '0:15',
        elapsed: '10:00',
        metrics: '-',
        triage: { kind: 'TIMEOUT', what: 'hit the limit', fix: 'raise resources.time' },
      },
    ]);
    expect(text.split('\n')[0]).toMatch(/^job\s+job id\s+state\s+exit\s+elapsed\s+metrics$/);
    expect(text).toContain('train[1]: TIMEOUT: hit the limit\n    fix: raise resources.time');
  });
});
