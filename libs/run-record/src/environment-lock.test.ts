import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Manifest } from './manifest.ts';
import { sampleOutputs } from '@kdgat/planning/testing';
import type { StackOutputs } from '@kdgat/planning';
import { loadEnvironmentSpec } from '@kdgat/config';
import {
  EnvironmentChangedError,
  LOCK_FILE,
  compareRecordedLocks,
  copyLocksIntoRun,
} from './environment-lock.ts';

const hash = (t: string) => createHash('sha256').update(t).digest('hex');
const LOCK_V1 = 'numpy==2.3.1\ntorch==2.8.0\n';
const LOCK_V2 = 'numpy==2.3.1\ntorch==2.8.1\noptuna==4.1.0\n';
const PREP_LOCK = 'numpy==2.3.1\n';
const cpuLocal = loadEnvironmentSpec('cpu-local');
const cpuPrep = { ...cpuLocal, name: 'cpu-prep' };
/** A run of two environments: the experiment's cpu-local, and cpu-prep for one stage. */
const resolved = { environment: cpuLocal, environments: { 'cpu-local': cpuLocal, 'cpu-prep': cpuPrep } };
const base = sampleOutputs.environments[0]!;
const stackWith = (lock: string, prepLock = PREP_LOCK): StackOutputs => ({
  ...sampleOutputs,
  environments: [
    { ...base, lock, lockHash: hash(lock) },
    { ...base, name: 'cpu-prep', prefix: '/opt/prep', lock: prepLock, lockHash: hash(prepLock) },
  ],
});

function recordedRun(lock: string, prepLock = PREP_LOCK): Manifest {
  const runDir = mkdtempSync(join(tmpdir(), 'runner-lock-'));
  const copied = copyLocksIntoRun(runDir, stackWith(lock, prepLock), resolved);
  const entry = (name: string, text: string) => ({
    name,
    specHash: 'a',
    lockHash: hash(text),
    lockPath: '/x',
    lockFile: copied.files[name]!,
  });
  return {
    runDir,
    environment: entry('cpu-local', lock),
    otherEnvironments: [entry('cpu-prep', prepLock)],
  } as Manifest;
}

describe('the locks travel with the run', () => {
  it('each environment the run uses is copied into the run dir byte for byte', () => {
    const run = recordedRun(LOCK_V1);
    expect(run.environment.lockFile).toBe(LOCK_FILE);
    expect(readFileSync(join(run.runDir, LOCK_FILE), 'utf8')).toBe(LOCK_V1);
    expect(run.otherEnvironments![0]!.lockFile).toBe('environment.cpu-prep.lock.txt');
    expect(readFileSync(join(run.runDir, 'environment.cpu-prep.lock.txt'), 'utf8')).toBe(PREP_LOCK);
  });

  it('is not copied when the stack exported none, and a lock that does not match its hash is refused', () => {
    const dir = mkdtempSync(join(tmpdir(), 'runner-lock-'));
    const one = { environment: cpuLocal, environments: { 'cpu-local': cpuLocal } };
    expect(copyLocksIntoRun(dir, sampleOutputs, one)).toEqual({
      files: {},
      notes: [expect.stringContaining('no lock text for cpu-local')],
    });
    const bad = { ...sampleOutputs, environments: [{ ...base, lock: LOCK_V1 }] };
    expect(() => copyLocksIntoRun(dir, bad, one)).toThrow(
      /lock text of cpu-local does not match its lock hash/,
    );
  });
});

describe('--from-manifest compares each recorded lock with the stack', () => {
  it('passes unchanged environments', () => {
    expect(compareRecordedLocks(recordedRun(LOCK_V1), stackWith(LOCK_V1), false)).toEqual({});
  });

  it('refuses a changed environment, naming it and listing the packages that differ', () => {
    const run = recordedRun(LOCK_V1);
    let error: unknown;
    try {
      compareRecordedLocks(run, stackWith(LOCK_V2), false);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(EnvironmentChangedError);
    expect((error as EnvironmentChangedError).differences).toEqual([
      '~ torch 2.8.0 -> 2.8.1',
      '+ optuna 4.1.0',
    ]);
    expect((error as Error).message).toMatch(
      /environment cpu-local changed[\s\S]*nothing was submitted[\s\S]*--allow-env-change/,
    );
    // the stage environment is compared too
    expect(() => compareRecordedLocks(recordedRun(LOCK_V1), stackWith(LOCK_V1, LOCK_V2), false)).toThrow(
      /environment cpu-prep changed/,
    );
  });

  it('with --allow-env-change: goes on and returns the differences of the one that changed', () => {
    expect(compareRecordedLocks(recordedRun(LOCK_V1), stackWith(LOCK_V2), true)).toEqual({
      'cpu-local': { changed: true, differences: ['~ torch 2.8.0 -> 2.8.1', '+ optuna 4.1.0'] },
    });
  });
});
