import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expandOutput, mergeCsv, naturalCompare } from './outputs.ts';
import { checkpointPatterns, newestCheckpoint } from './recovery/facts.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kdgat-outputs-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const put = (rel: string, text = '', mtimeS?: number) => {
  mkdirSync(join(dir, rel, '..'), { recursive: true });
  writeFileSync(join(dir, rel), text);
  if (mtimeS !== undefined) utimesSync(join(dir, rel), mtimeS, mtimeS);
};

describe("a stage's declared outputs in its task dir", () => {
  it('expands * within names in natural order (attempt 10 after attempt 9), files only', () => {
    for (const v of [10, 2, 9]) put(`lightning_logs/version_${v}/metrics.csv`, 'epoch\n');
    mkdirSync(join(dir, 'lightning_logs', 'version_11'));
    expect(
      expandOutput(dir, 'lightning_logs/version_*/metrics.csv').map((f) => f.slice(dir.length + 1)),
    ).toEqual([
      'lightning_logs/version_2/metrics.csv',
      'lightning_logs/version_9/metrics.csv',
      'lightning_logs/version_10/metrics.csv',
    ]);
    expect(expandOutput(dir, 'missing/*.csv')).toEqual([]);
    expect(expandOutput(dir, 'lightning_logs')).toEqual([]); // a directory is not an output file
    expect(['b10', 'b9', 'a', 'b100'].sort(naturalCompare)).toEqual(['a', 'b9', 'b10', 'b100']);
  });

  it("merges one history per attempt into one, columns in the order first seen, each attempt's rows in turn", () => {
    put('v/version_0/metrics.csv', 'epoch,step,val_loss\n0,9,0.5\n1,19,0.4\n');
    put('v/version_1/metrics.csv', 'epoch,step,train_loss,val_loss\n2,29,0.3,0.35\n');
    expect(mergeCsv(expandOutput(dir, 'v/version_*/metrics.csv'))).toBe(
      'epoch,step,val_loss,train_loss\n0,9,0.5,\n1,19,0.4,\n2,29,0.35,0.3\n',
    );
  });

  it("finds the newest checkpoint any declared pattern names (Lightning's hpc_ckpt_<n>.ckpt or last.ckpt)", () => {
    const manifest = {
      resolved: { pipeline: { outputs: { checkpoint: ['checkpoints/last.ckpt', 'hpc_ckpt_*.ckpt'] } } },
    } as never;
    const patterns = checkpointPatterns(manifest);
    expect(newestCheckpoint(dir, patterns)).toBeUndefined();
    put('checkpoints/last.ckpt', 'x', 1000);
    put('hpc_ckpt_1.ckpt', 'x', 2000);
    expect(newestCheckpoint(dir, patterns)).toBe('hpc_ckpt_1.ckpt');
    put('checkpoints/last.ckpt', 'x', 3000);
    expect(newestCheckpoint(dir, patterns)).toBe('checkpoints/last.ckpt');
    // A manifest of the default pipeline (or written before declarations): the run contract's.
    expect(checkpointPatterns({ resolved: {} } as never)).toEqual(['checkpoints/last.ckpt']);
  });
});
