// The environment's explicit lock travels with the run: copied into the run directory and named in
// the manifest, so a later `pulumi up` (which rewrites the lock on the site) cannot lose it, and
// `train --from-manifest` can tell whether the environment changed since the recorded run.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { diffLocks, formatLockDiff } from '@kdgat/config';
import { sha256, type Manifest } from './manifest.ts';
import type { StackOutputs } from '@kdgat/planning';

/** The lock's name inside a run directory. */
export const LOCK_FILE = 'environment.lock.txt';

export class EnvironmentChangedError extends Error {
  readonly differences: string[];
  constructor(message: string, differences: string[]) {
    super(message);
    this.name = 'EnvironmentChangedError';
    this.differences = differences;
  }
}

/**
 * Writes the stack's lock into the run dir; returns its file name, or undefined (with the reason)
 * when the stack's outputs carry no lock text (a stack provisioned before locks were exported).
 */
export function copyLockIntoRun(runDir: string, stack: StackOutputs): { file?: string; note?: string } {
  const lock = stack.environment.lock;
  if (lock === undefined || lock === '')
    return { note: `the stack's outputs carry no lock text (only its hash): run \`pulumi up\` to export it` };
  if (sha256(lock) !== stack.environment.lockHash)
    throw new Error(
      `the stack's lock text does not match its lock hash ${stack.environment.lockHash.slice(0, 12)}: refresh the stack (nx run infra:refresh)`,
    );
  writeFileSync(join(runDir, LOCK_FILE), lock);
  return { file: LOCK_FILE };
}

/**
 * `--from-manifest`: the stack's current lock against the one the run recorded. On a mismatch the
 * packages that differ are listed; the run is refused unless the caller allows the change.
 */
export function compareRecordedLock(
  source: Manifest,
  stack: StackOutputs,
  allowChange: boolean,
): { changed: boolean; differences: string[] } {
  const recordedHash = source.environment.lockHash;
  const currentHash = stack.environment.lockHash;
  if (recordedHash === currentHash) return { changed: false, differences: [] };
  const recordedFile = source.environment.lockFile
    ? join(source.runDir, source.environment.lockFile)
    : undefined;
  const recorded = recordedFile && existsSync(recordedFile) ? readFileSync(recordedFile, 'utf8') : undefined;
  const current = stack.environment.lock;
  const differences =
    recorded !== undefined && current !== undefined
      ? formatLockDiff(diffLocks(recorded, current))
      : [
          `(cannot list the packages: ${recorded === undefined ? `the recorded run has no lock file${recordedFile ? ` at ${recordedFile}` : ''}` : "the stack's outputs carry no lock text"})`,
        ];
  if (differences.length === 0)
    differences.push('(same packages; the lock text differs, e.g. in URLs or checksums)');
  if (!allowChange) {
    throw new EnvironmentChangedError(
      `the environment ${stack.environment.name} changed since the recorded run ` +
        `(lock ${recordedHash.slice(0, 12)} then, ${currentHash.slice(0, 12)} now); nothing was submitted. ` +
        `Packages that differ (recorded -> now):\n${differences.map((d) => `  ${d}`).join('\n')}\n` +
        `Rerun with --allow-env-change to run it on the current environment anyway.`,
      differences,
    );
  }
  return { changed: true, differences };
}
