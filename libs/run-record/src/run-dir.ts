// Where a new run goes: `<runs root>/<experiment>/<utc time>-<spec hash 8>[-n]`, never an existing
// directory; and the lock file that serialises `train` calls on one runs root.
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** Taken by `train` while it checks for active runs and submits (runs-lock.ts). */
export const RUNS_LOCK_FILE = '.kdgat-runner.lock';

function utcStamp(d: Date): string {
  return d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

export function newRunDir(runsRoot: string, experiment: string, specHash: string, now = new Date()): string {
  const base = join(runsRoot, experiment, `${utcStamp(now)}-${specHash.slice(0, 8)}`);
  let runDir = base;
  for (let n = 2; existsSync(runDir); n++) runDir = `${base}-${n}`;
  return runDir;
}
