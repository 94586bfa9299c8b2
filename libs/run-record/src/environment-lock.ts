// The environment's explicit lock travels with the run: copied into the run directory and named in
// the manifest, so a later `pulumi up` (which rewrites the lock on the site) cannot lose it, and
// `train --from-manifest` can tell whether the environment changed since the recorded run.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  diffLocks,
  formatLockDiff,
  stackEnvironment,
  type ResolvedExperiment,
  type StackEnvironmentOutputs,
} from '@kdgat/config';
import { environmentsOf, sha256, type Manifest, type ManifestEnvironment } from './manifest.ts';
import type { StackOutputs } from '@kdgat/planning';

/** The lock's name inside a run directory: the experiment's environment's, and another stage environment's. */
export const LOCK_FILE = 'environment.lock.txt';
export function lockFileOf(environment: string, experimentEnvironment: string): string {
  return environment === experimentEnvironment ? LOCK_FILE : `environment.${environment}.lock.txt`;
}

export class EnvironmentChangedError extends Error {
  readonly differences: string[];
  constructor(message: string, differences: string[]) {
    super(message);
    this.name = 'EnvironmentChangedError';
    this.differences = differences;
  }
}

/**
 * Writes the lock of each environment the run uses into the run dir; returns the file name of each
 * (by environment name), and a note for those whose stack outputs carry no lock text (a stack
 * provisioned before locks were exported).
 */
export function copyLocksIntoRun(
  runDir: string,
  stack: StackOutputs,
  resolved: Pick<ResolvedExperiment, 'environment' | 'environments'>,
): { files: Record<string, string>; notes: string[] } {
  const files: Record<string, string> = {};
  const notes: string[] = [];
  for (const name of Object.keys(resolved.environments)) {
    const env = stackEnvironment(stack, name);
    if (!env) continue; // refused by checkEnvironmentMatches before anything is written
    if (env.lock === undefined || env.lock === '') {
      notes.push(
        `the stack's outputs carry no lock text for ${name} (only its hash): run \`pulumi up\` to export it`,
      );
      continue;
    }
    if (sha256(env.lock) !== env.lockHash)
      throw new Error(
        `the stack's lock text of ${name} does not match its lock hash ${env.lockHash.slice(0, 12)}: refresh the stack (nx run infra:refresh)`,
      );
    const file = lockFileOf(name, resolved.environment.name);
    writeFileSync(join(runDir, file), env.lock);
    files[name] = file;
  }
  return { files, notes };
}

/**
 * `--from-manifest`: the stack's current lock of each environment the run used against the one it
 * recorded. On a mismatch the packages that differ are listed; the run is refused unless the caller
 * allows the change. Returns the change by environment name (only those that changed).
 */
export function compareRecordedLocks(
  source: Manifest,
  stack: StackOutputs,
  allowChange: boolean,
): Record<string, { changed: boolean; differences: string[] }> {
  const changes: Record<string, { changed: boolean; differences: string[] }> = {};
  for (const recordedEnv of environmentsOf(source)) {
    const current = stackEnvironment(stack, recordedEnv.name);
    if (!current) continue; // refused by checkEnvironmentMatches
    const change = compareLock(source, recordedEnv, current, allowChange);
    if (change.changed) changes[recordedEnv.name] = change;
  }
  return changes;
}

function compareLock(
  source: Manifest,
  recordedEnv: ManifestEnvironment,
  env: StackEnvironmentOutputs,
  allowChange: boolean,
): { changed: boolean; differences: string[] } {
  const recordedHash = recordedEnv.lockHash;
  const currentHash = env.lockHash;
  if (recordedHash === currentHash) return { changed: false, differences: [] };
  const recordedFile = recordedEnv.lockFile ? join(source.runDir, recordedEnv.lockFile) : undefined;
  const recorded = recordedFile && existsSync(recordedFile) ? readFileSync(recordedFile, 'utf8') : undefined;
  const current = env.lock;
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
      `the environment ${env.name} changed since the recorded run ` +
        `(lock ${recordedHash.slice(0, 12)} then, ${currentHash.slice(0, 12)} now); nothing was submitted. ` +
        `Packages that differ (recorded -> now):\n${differences.map((d) => `  ${d}`).join('\n')}\n` +
        `Rerun with --allow-env-change to run it on the current environment anyway.`,
      differences,
    );
  }
  return { changed: true, differences };
}
