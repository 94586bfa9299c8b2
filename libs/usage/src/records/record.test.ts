import { clusterPresets } from '@kdgat/config';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseBalance } from '../balance/balance.ts';
import { stageHistory } from '../history/runs.ts';
import { record } from '../test-support.ts';
import { JOB_RECORD_FILE, parseJobRecords, taskUsage } from './record.ts';

describe('job records', () => {
  it('parses JSON lines, skipping a truncated or foreign line', () => {
    const text = [JSON.stringify(record()), '{"schema":"other"}', '{"schema":"kdgat.job-re', ''].join('\n');
    expect(parseJobRecords(text)).toHaveLength(1);
  });
  it('reads the task count of the request; a record written before it had one task (null)', () => {
    const withTasks = record({
      requested: { cpus: 8, memGB: 85, gpus: 2, timeSeconds: 600, partition: 'gpu', tasks: 2 },
    });
    const { tasks: _none, ...old } = record().requested;
    const before = { ...record(), requested: old };
    const [a, b] = parseJobRecords([JSON.stringify(withTasks), JSON.stringify(before)].join('\n'));
    expect(a!.requested.tasks).toBe(2);
    expect(b!.requested.tasks).toBeNull();
  });
  it('a requeued task sums elapsed and CPU time over attempts and keeps the largest peaks', () => {
    const u = taskUsage('/x', [
      record({
        state: 'REQUEUED',
        elapsedSeconds: 100,
        used: { cpuSeconds: 100, peakRssMB: 500 },
        timeLimitHit: true,
      }),
      record({ restart: 1, elapsedSeconds: 50, used: { cpuSeconds: 200, peakRssMB: 300 } }),
    ])!;
    expect(u.completed).toBe(true);
    expect(u.elapsedSeconds).toBe(150);
    expect(u.meanCpus).toBe(2);
    expect(u.peakRssMB).toBe(500);
    expect(u.timeLimitHit).toBe(true);
  });
});

describe('stageHistory', () => {
  it('finds the records of the same stage, model, scale and dataset under the runs root', () => {
    const root = mkdtempSync(join(tmpdir(), 'usage-history-'));
    const run = (name: string, dataset: string, array?: number) => {
      const runDir = join(root, 'exp', name);
      const runRoot = join(runDir, 'outputs');
      mkdirSync(runDir, { recursive: true });
      const manifest = {
        runDir,
        experiment: 'exp',
        createdAt: name,
        jobs: [
          { key: 'ae', stageId: 'ae', runRoot, ...(array ? { array: { size: array, firstPoint: 0 } } : {}) },
        ],
        resolved: { stages: [{ id: 'ae', stage: 'autoencoder', model: 'vgae', scale: 'small', dataset }] },
      };
      writeFileSync(join(runDir, 'manifest.json'), JSON.stringify(manifest));
      const dirs = array
        ? Array.from({ length: array }, (_, i) =>
            join(runRoot, `point_${i}`, dataset, 'vgae_small_autoencoder'),
          )
        : [join(runRoot, dataset, 'vgae_small_autoencoder')];
      for (const d of dirs) {
        mkdirSync(d, { recursive: true });
        writeFileSync(join(d, JOB_RECORD_FILE), `${JSON.stringify(record({ dataset }))}\n`);
      }
    };
    run('20260101T000000Z-a', 'synth');
    run('20260102T000000Z-b', 'synth', 3);
    run('20260103T000000Z-c', 'other');
    mkdirSync(join(root, '.local-scheduler'));
    const h = stageHistory(root, { stage: 'autoencoder', model: 'vgae', scale: 'small', dataset: 'synth' });
    expect(h.runs).toHaveLength(2);
    expect(h.tasks).toHaveLength(4);
    expect(
      stageHistory(root, { stage: 'curriculum', model: 'gat', scale: 'small', dataset: 'synth' }).tasks,
    ).toEqual([]);
  });
});

describe('parseBalance', () => {
  it("reads an amount with the OSC preset's pattern", () => {
    const cmd = clusterPresets['osc-pitzer'].balance!;
    expect(parseBalance('Project PAS1266\n  Remaining balance: $1,248.15\n', cmd)).toBe(1248.15);
    expect(parseBalance('no such project\n', cmd)).toBeNull();
  });
});
