import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Manifest } from './manifest.ts';
import { sampleOutputs } from '@kdgat/planning/testing';
import type { StackOutputs } from '@kdgat/planning';
import {
  EnvironmentChangedError,
  LOCK_FILE,
  compareRecordedLock,
  copyLockIntoRun,
} from './environment-lock.ts';

const hash = (t: string) => createHash('sha256').update(t).digest('hex');
const LOCK_V1 = 'numpy==2.3.1\ntorch==2.8.0\n';
const LOCK_V2 = 'numpy==2.3.1\ntorch==2.8.1\noptuna==4.1.0\n';
const stackWith = (lock: string): StackOutputs => ({
  ...sampleOutputs,
  environment: { ...sampleOutputs.environment, lock, lockHash: hash(lock) },
});

function recordedRun(lock: string): Manifest {
  const runDir = mkdtempSync(join(tmpdir(), 'runner-lock-'));
  const copied = copyLockIntoRun(runDir, stackWith(lock));
  return {
    runDir,
    environment: {
      name: 'cpu-local',
      specHash: 'a',
      lockHash: hash(lock),
      lockPath: '/x',
      lockFile: copied.file!,
    },
  } as Manifest;
}

describe('the lock travels with the run', () => {
  it('is copied into the run dir byte for byte', () => {
    const run = recordedRun(LOCK_V1);
    expect(run.environment.lockFile).toBe(LOCK_FILE);
    expect(readFileSync(join(run.runDir, LOCK_FILE), 'utf8')).toBe(LOCK_V1);
  });

  it('is not copied when the stack exported none, and a lock that does not match its hash is refused', () => {
    const dir = mkdtempSync(join(tmpdir(), 'runner-lock-'));
    expect(copyLockIntoRun(dir, sampleOutputs)).toEqual({ note: expect.stringContaining('no lock text') });
    const bad = { ...sampleOutputs, environment: { ...sampleOutputs.environment, lock: LOCK_V1 } };
    expect(() => copyLockIntoRun(dir, bad)).toThrow(/does not match its lock hash/);
  });
});

describe('--from-manifest compares the recorded lock with the stack', () => {
  it('passes an unchanged environment', () => {
    expect(compareRecordedLock(recordedRun(LOCK_V1), stackWith(LOCK_V1), false)).toEqual({
      changed: false,
      differences: [],
    });
  });

  it('refuses a changed environment, listing the packages that differ', () => {
    const run = recordedRun(LOCK_V1);
    let error: unknown;
    try {
      compareRecordedLock(run, stackWith(LOCK_V2), false);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(EnvironmentChangedError);
    expect((error as EnvironmentChangedError).differences).toEqual([
      '~ torch 2.8.0 -> 2.8.1',
      '+ optuna 4.1.0',
    ]);
    expect((error as Error).message).toMatch(/nothing was submitted[\s\S]*--allow-env-change/);
  });

  it('with --allow-env-change: goes on and returns the differences', () => {
    expect(compareRecordedLock(recordedRun(LOCK_V1), stackWith(LOCK_V2), true)).toEqual({
      changed: true,
      differences: ['~ torch 2.8.0 -> 2.8.1', '+ optuna 4.1.0'],
    });
  });
});
