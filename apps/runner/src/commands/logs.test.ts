// `runner logs` prints what the job wrote with its terminal escapes shown, not obeyed: a log that
// retitles the terminal and clears it is printed as readable text, its lines otherwise whole.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RunRecord, type Manifest } from '@kdgat/run-record';
import { run } from '../cli/run-in-process.test-support.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A run of one finished job (id 100) on this machine, its log written by `body`. */
function runWithLog(body: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-logs-run-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'logs'));
  writeFileSync(join(dir, 'logs', 'exp-train-100.out'), body);
  const manifest = {
    version: 1,
    experiment: 'exp',
    createdAt: '2026-11-25T00:00:00Z',
    runDir: dir,
    jobs: [
      {
        key: 'train',
        name: 'exp-train',
        stageId: 'train',
        script: 'scripts/train.sbatch',
        dependsOn: [],
        jobId: '100',
        runRoot: join(dir, 'outputs'),
        logs: { output: join(dir, 'logs/%x-%j.out'), error: join(dir, 'logs/%x-%j.out') },
      },
    ],
    arrayIndex: {},
    stack: {
      name: 'local',
      source: 'test',
      outputs: { connection: { kind: 'local' }, scratch: { runsDir: join(dir, 'runs') } },
    },
    scheduler: 'local',
    submission: { status: 'submitted' },
  } as unknown as Manifest;
  RunRecord.create(dir, manifest);
  return dir;
}

describe('runner logs', () => {
  it("shows a log's escape sequences and control characters as text, keeping newlines and tabs", async () => {
    const dir = runWithLog(
      'epoch 1\tloss 0.5\n\x1b]0;title\x07\x1b[2Jprogress 10%\rprogress 99%\x08\x1b[31mred\n',
    );
    const r = await run(['logs', dir]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('epoch 1\tloss 0.5\n');
    expect(r.out).toContain('\\x1b]0;title\\x07\\x1b[2Jprogress 10%\\rprogress 99%\\x08\\x1b[31mred');
    // Nothing the terminal would act on: no control character but newline and tab.
    // eslint-disable-next-line no-control-regex
    expect(r.out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    const tail = await run(['logs', dir, '--lines', '1']);
    expect(tail.out).toContain('\\x1b]0;title\\x07\\x1b[2J');
  });
});
