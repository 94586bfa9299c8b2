// SLURM accounting kept in the manifest (`lastSeen.accounting`) in place of the job record's own
// figures, where the record is the attempt sacct describes.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JOB_RECORD_FILE, type JobRecord } from '../records/record.ts';
import { pitzerGpu, record, resources } from '../test-support.ts';
import { rightSize } from './right-size.ts';
import { stageHistory, tasksOfRun, withAccounting, type AccountedUsage, type RunLike } from './runs.ts';

// A 2-task srun job: the epilog counted the batch shell's children (≈ nothing), sacct all steps.
const srunRecord = record({
  jobId: '501',
  elapsedSeconds: 600,
  used: { cpuSeconds: 1.5, meanCpus: 0.0025, peakRssMB: 900, peakRssSource: 'cgroup' },
});
const sacct: AccountedUsage = { cpuSeconds: 2398.12, maxRssMB: 2027.5, elapsedSeconds: 600 };

describe('records read sacct where it answers', () => {
  it("replaces the job record's CPU time and peak with sacct's, and says so", () => {
    const [r] = withAccounting([srunRecord], '501', null, sacct);
    expect(r!.used).toMatchObject({
      cpuSeconds: 2398.12,
      meanCpus: 2398.12 / 600,
      peakRssMB: 2027.5,
      peakRssSource: 'sacct',
      cpuSource: 'sacct',
    });
    expect(r!.elapsedSeconds).toBe(600);
  });

  it('keeps the record where sacct counted less (a step killed by a signal loses its children) or sampled no peak', () => {
    const [r] = withAccounting([record({ jobId: '9', used: { cpuSeconds: 1200 } })], '9', null, {
      cpuSeconds: 3,
      maxRssMB: null,
      elapsedSeconds: 600,
    });
    expect(r!.used).toMatchObject({
      cpuSeconds: 1200,
      meanCpus: 2,
      peakRssMB: 4096,
      peakRssSource: 'pipeline',
      cpuSource: 'job-record',
    });
  });

  it('applies only to the attempt sacct describes: the same job id or array task, not a requeued one', () => {
    const task = record({ jobId: '512', arrayJobId: '510', arrayTaskId: '1' });
    expect(withAccounting([task], '510', 1, sacct)[0]!.used.cpuSource).toBe('sacct');
    expect(withAccounting([task], '510', 2, sacct)[0]!.used.cpuSource).toBeUndefined();
    expect(withAccounting([record({ jobId: '77' })], '501', null, sacct)[0]!.used.cpuSource).toBeUndefined();
    // The record of an attempt that was requeued: sacct speaks of a later one that left no record.
    expect(
      withAccounting([record({ jobId: '501', state: 'REQUEUED' })], '501', null, sacct)[0]!.used.cpuSource,
    ).toBeUndefined();
    // Requeued then finished: the final attempt is sacct's, the first keeps its record.
    const both = withAccounting(
      [
        record({ jobId: '501', state: 'REQUEUED', elapsedSeconds: 100, used: { cpuSeconds: 100 } }),
        record({ jobId: '501', restart: 1 }),
      ],
      '501',
      null,
      sacct,
    );
    expect(both.map((a) => a.used.cpuSource)).toEqual([undefined, 'sacct']);
  });

  it('tasksOfRun matches the manifest job to its records and right-sizing sizes from sacct', () => {
    const runDir = mkdtempSync(join(tmpdir(), 'usage-sacct-'));
    const runRoot = join(runDir, 'outputs');
    const run: RunLike = {
      runDir,
      experiment: 'exp',
      jobs: [
        { key: 'ae', stageId: 'ae', runRoot, jobId: '501', lastSeen: { accounting: { '-': sacct } } },
        { key: 'ae2', stageId: 'ae', runRoot: join(runDir, 'other'), jobId: '502' },
      ],
      resolved: {
        stages: [{ id: 'ae', stage: 'autoencoder', model: 'vgae', scale: 'small', dataset: 'synth' }],
      },
    };
    const write = (root: string, r: JobRecord) => {
      const dir = join(root, 'synth', 'vgae_small_autoencoder');
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, JOB_RECORD_FILE), `${JSON.stringify(r)}\n`);
    };
    write(runRoot, srunRecord);
    write(join(runDir, 'other'), record({ jobId: '502' }));
    const [a, b] = tasksOfRun(run);
    expect(a!.usage).toMatchObject({
      cpuSeconds: 2398.12,
      peakRssMB: 2027.5,
      cpuSource: 'sacct',
      peakRssSource: 'sacct',
    });
    // No accounting for that job: the job record, as before.
    expect(b!.usage).toMatchObject({
      cpuSeconds: 1200,
      meanCpus: 2,
      cpuSource: 'job-record',
      peakRssSource: 'pipeline',
    });

    const sized = rightSize({
      tasks: [a!.usage!],
      runs: 1,
      current: resources({ cpus: 8, memGB: 16 }),
      partition: pitzerGpu,
      leadSeconds: 0,
    });
    // ~4 cores busy (sacct) x 1.25, not the epilog's 0.0025 (which sizes to 1); memory from MaxRSS.
    expect(sized.cpus!.value).toBe(5);
    expect(sized.memGB!.value).toBe(3);
  });
});

describe('history of a site reached over SSH', () => {
  it("reads a run's local copy where it lies, though its manifest names the site's paths", () => {
    const root = mkdtempSync(join(tmpdir(), 'usage-site-copy-'));
    const local = join(root, 'tiny', '20261127T000000Z-abcd');
    const sitePath = '/fs/scratch/PAS1266/kd-gat/runs/tiny/20261127T000000Z-abcd';
    const dir = join(local, 'outputs', 'synth', 'mlp_small_train');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, JOB_RECORD_FILE),
      `${JSON.stringify(record({ jobId: '7', stage: 'train', model: 'mlp', scale: 'small', dataset: 'synth' }))}\n`,
    );
    const manifest: RunLike = {
      runDir: sitePath,
      experiment: 'tiny',
      jobs: [{ key: 'fit', stageId: 'fit', runRoot: `${sitePath}/outputs`, jobId: '7' }],
      resolved: { stages: [{ id: 'fit', stage: 'train', model: 'mlp', scale: 'small', dataset: 'synth' }] },
    };
    writeFileSync(join(local, 'manifest.json'), JSON.stringify(manifest));
    const history = stageHistory(root, { stage: 'train', model: 'mlp', scale: 'small', dataset: 'synth' });
    expect(history.runs).toEqual([local]);
    expect(history.tasks).toHaveLength(1);
  });
});
