import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { JobState, Scheduler, TaskStatus } from '@kdgat/schedulers';
import type { Manifest } from '../manifest.ts';
import { watchRun } from './watch.ts';

function stream(tty: boolean) {
  const writes: string[] = [];
  const out = Object.assign(
    new Writable({
      write(chunk, _enc, cb) {
        writes.push(String(chunk));
        cb();
      },
    }),
    { isTTY: tty, columns: 200 },
  );
  return { out, writes };
}

const manifest = {
  runDir: '/nonexistent',
  jobs: [
    {
      key: 'train',
      name: 'x-train',
      stageId: 'train',
      script: 'scripts/train.sbatch',
      dependsOn: [],
      jobId: '7',
      runRoot: '/nonexistent/outputs',
      logs: { output: '/nonexistent/logs/%x-%j.out', error: '/nonexistent/logs/%x-%j.err' },
    },
  ],
} as unknown as Manifest;

/**
 * A scheduler that answers one state per poll, its elapsed time growing a second per poll (as
 * squeue's does), and a clock that moves `stepMs` per poll.
 */
function scripted(states: JobState[], stepMs: number) {
  let t = Date.parse('2026-01-01T10:00:00Z');
  let poll = 0;
  const scheduler = {
    kind: 'slurm',
    submitCalls: 0,
    query: async () => {
      const state = states[Math.min(poll, states.length - 1)]!;
      const task: TaskStatus = { jobId: '7', state, elapsedSeconds: poll };
      poll++;
      return new Map([['7', [task]]]);
    },
  } as unknown as Scheduler;
  return {
    scheduler,
    now: () => t,
    sleep: async () => {
      t += stepMs;
    },
    polls: () => poll,
  };
}

describe('--wait output', () => {
  // 10 polls PENDING, 250 polls RUNNING (a second apart: over four minutes), then COMPLETED.
  const states: JobState[] = [
    ...Array<JobState>(10).fill('PENDING'),
    ...Array<JobState>(250).fill('RUNNING'),
    'COMPLETED',
  ];

  it('off a terminal: a line per state change and a heartbeat at most once a minute', async () => {
    const s = scripted(states, 1000);
    const { out, writes } = stream(false);
    await watchRun({ scheduler: s.scheduler, manifest, out, now: s.now, sleep: s.sleep });
    expect(s.polls()).toBe(261);
    const lines = writes.join('').trimEnd().split('\n');
    expect(lines[0]).toMatch(/^10:00:00 train \[7\] PENDING 0:00$/);
    expect(lines[1]).toMatch(/^10:00:10 train \[7\] RUNNING 0:10$/);
    expect(lines.at(-1)).toMatch(/^10:04:20 train \[7\] COMPLETED 4:20$/);
    const heartbeats = lines.filter((l) => l.includes(' still: '));
    // RUNNING from 10:00:10 to 10:04:19: heartbeats at 10:01:10, 10:02:10, 10:03:10, 10:04:10.
    expect(heartbeats.map((l) => l.slice(0, 8))).toEqual(['10:01:10', '10:02:10', '10:03:10', '10:04:10']);
    expect(lines).toHaveLength(3 + heartbeats.length);
  });

  it('off a terminal, polls further apart than a minute still print only on changes and heartbeats', async () => {
    const s = scripted(['PENDING', 'PENDING', 'RUNNING', 'RUNNING', 'COMPLETED'], 90_000);
    const { out, writes } = stream(false);
    await watchRun({ scheduler: s.scheduler, manifest, out, now: s.now, sleep: s.sleep });
    const lines = writes.join('').trimEnd().split('\n');
    expect(lines.map((l) => l.slice(9, 22))).toEqual([
      'train [7] PEN',
      'still: train ',
      'train [7] RUN',
      'still: train ',
      'train [7] COM',
    ]);
  });

  it("on a terminal: the running job's last log line is shown with its escapes as text", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-watch-log-'));
    try {
      mkdirSync(join(dir, 'logs'));
      writeFileSync(join(dir, 'logs', 'x-train-7.out'), 'epoch 1\nstep 9\x1b]0;title\x07\x1b[2J\r\n');
      const job = {
        ...manifest.jobs[0]!,
        logs: { output: join(dir, 'logs/%x-%j.out'), error: join(dir, 'e') },
      };
      const s = scripted(['RUNNING', 'COMPLETED'], 1000);
      const { out, writes } = stream(true);
      await watchRun({
        scheduler: s.scheduler,
        manifest: { ...manifest, jobs: [job] },
        out,
        now: s.now,
        sleep: s.sleep,
      });
      expect(writes[0]).toBe('\r\x1b[2Ktrain [7] RUNNING 0:00 | step 9\\x1b]0;title\\x07\\x1b[2J\\r');
      // Past our own redraw prefix, nothing the terminal would act on.
      // eslint-disable-next-line no-control-regex
      expect(writes[0]!.slice('\r\x1b[2K'.length)).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('on a terminal: the live line redrawn every poll, and a newline at the end', async () => {
    const s = scripted(states.slice(8, 14).concat('COMPLETED'), 1000);
    const { out, writes } = stream(true);
    await watchRun({ scheduler: s.scheduler, manifest, out, now: s.now, sleep: s.sleep });
    expect(writes).toHaveLength(s.polls() + 1);
    expect(writes.slice(0, -1).every((w) => w.startsWith('\r\x1b[2Ktrain [7] '))).toBe(true);
    expect(writes.at(-1)).toBe('\n');
  });
});

describe('backing off on states (a site over SSH)', () => {
  it('polls a long running job ever less often while only its elapsed time moves', async () => {
    const manifest = {
      jobs: [
        {
          key: 'train',
          name: 'n',
          stageId: 'train',
          script: 's',
          dependsOn: [],
          runRoot: '/r',
          logs: { output: '/nope', error: '/nope' },
          jobId: '7',
        },
      ],
    } as unknown as Manifest;
    let elapsed = 0;
    let polls = 0;
    const scheduler = {
      query: async () => {
        polls++;
        elapsed += 5;
        const state = polls >= 8 ? 'COMPLETED' : 'RUNNING';
        return new Map([['7', [{ jobId: '7', state, elapsedSeconds: elapsed }]]]);
      },
    } as unknown as Scheduler;
    const pauses: number[] = [];
    const out = Object.assign(new PassThrough(), { isTTY: false });
    await watchRun({
      scheduler,
      manifest,
      out,
      minIntervalMs: 5000,
      maxIntervalMs: 30_000,
      backOffOnStates: true,
      now: () => 0,
      sleep: async (ms) => void pauses.push(ms),
    });
    expect(pauses).toEqual([5000, 7500, 11250, 16875, 25313, 30000, 30000]);
  });
});
