import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SchedulerError, type Scheduler, type TaskStatus } from '@kdgat/schedulers';
import { ActiveRunCheckError, AlreadyQueuedError, refuseActiveRuns } from './active-runs.ts';
import { MANIFEST_FILE, MANIFEST_VERSION, type Manifest } from './manifest.ts';

const HASH = 'abcdef12'.repeat(8);

/** A runs root with one earlier, submitted run of the spec on `scheduler`. */
function earlierRun(scheduler: 'slurm' | 'local', status: Manifest['submission']['status'] = 'submitted') {
  const runsRoot = mkdtempSync(join(tmpdir(), 'run-record-active-'));
  const runDir = join(runsRoot, 'exp', `20260101T000000Z-${HASH.slice(0, 8)}`);
  mkdirSync(runDir, { recursive: true });
  const manifest = {
    version: MANIFEST_VERSION,
    experiment: 'exp',
    runDir,
    spec: { file: 'exp.yaml', text: '', hash: HASH },
    stack: { name: 'local', source: 'file', outputs: { scratch: { runsDir: runsRoot } } },
    scheduler,
    jobs: [{ key: 'train', jobId: '41' }],
    submission: { status },
  } as unknown as Manifest;
  writeFileSync(join(runDir, MANIFEST_FILE), JSON.stringify(manifest));
  return { runsRoot, runDir };
}

function answering(query: () => Promise<Map<string, TaskStatus[]>>): Scheduler {
  return { kind: 'slurm', submitCalls: 0, query } as unknown as Scheduler;
}

describe('refuseActiveRuns (the guard before a submit)', () => {
  it('refuses while an earlier run of the spec is queued or running, with its job ids', async () => {
    const { runsRoot, runDir } = earlierRun('slurm');
    const running = answering(async () => new Map([['41', [{ jobId: '41', state: 'RUNNING' as const }]]]));
    const err = await refuseActiveRuns(runsRoot, 'exp', HASH, () => running).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AlreadyQueuedError);
    expect((err as Error).message).toContain(`${runDir}: job ids 41`);
  });

  it('lets a run through when the earlier one has ended, or was never submitted', async () => {
    const ended = answering(async () => new Map([['41', [{ jobId: '41', state: 'COMPLETED' as const }]]]));
    await expect(
      refuseActiveRuns(earlierRun('slurm').runsRoot, 'exp', HASH, () => ended),
    ).resolves.toBeUndefined();
    const never = () => {
      throw new Error('a run that was never submitted is not asked about');
    };
    await expect(
      refuseActiveRuns(earlierRun('slurm', 'failed').runsRoot, 'exp', HASH, never),
    ).resolves.toBeUndefined();
  });

  it('names the run and its scheduler when that scheduler does not answer, and says what to do', async () => {
    const { runsRoot, runDir } = earlierRun('slurm');
    const down = answering(() =>
      Promise.reject(
        new SchedulerError(
          'scontrol show config failed: slurm_load_ctl_conf error: Unable to contact slurm controller',
          'scontrol show config',
          '',
        ),
      ),
    );
    const err = await refuseActiveRuns(runsRoot, 'exp', HASH, () => down).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActiveRunCheckError);
    const message = (err as Error).message;
    expect(message).toContain(`earlier run ${runDir} of this spec`);
    expect(message).toMatch(
      /submitted to SLURM \(stack local\), which did not answer \(scontrol show config failed: .*Unable to contact/,
    );
    expect(message).toMatch(/scripts\/slurm-local\.sh up/);
    expect(message).toMatch(/--force to submit without checking/);
    expect(message).toMatch(/Nothing was submitted/);
  });
});
