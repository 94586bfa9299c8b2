// The on-disk state of the local scheduler: one directory, one JSON record per job, written
// atomically by the job's supervisor process; a `<id>.cancel` marker asks it to stop.
import { mkdirSync, readFileSync, renameSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { JobState, SubmitRequest } from '../core.ts';

export interface LocalTaskRecord {
  index?: number;
  jobId: string;
  state: JobState;
  exitCode?: string;
  startedAt?: string;
  endedAt?: string;
  pid?: number;
  reason?: string;
}

export interface LocalJobRecord {
  id: string;
  request: SubmitRequest;
  submittedAt: string;
  supervisorPid?: number;
  tasks: LocalTaskRecord[];
}

export function recordPath(stateDir: string, id: string): string {
  return join(stateDir, `${id}.json`);
}

export function cancelMarker(stateDir: string, id: string): string {
  return join(stateDir, `${id}.cancel`);
}

export function readRecord(stateDir: string, id: string): LocalJobRecord | undefined {
  const p = recordPath(stateDir, id);
  if (!existsSync(p)) return undefined;
  return JSON.parse(readFileSync(p, 'utf8')) as LocalJobRecord;
}

export function writeRecord(stateDir: string, record: LocalJobRecord): void {
  const p = recordPath(stateDir, record.id);
  const tmp = `${p}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(record, null, 2) + '\n');
  renameSync(tmp, p);
}

/**
 * Allocates `count` consecutive job ids (an array of N tasks takes N+1, like SLURM gives each
 * task its own id). A directory made with mkdir is the lock: atomic on every filesystem.
 */
export async function allocateJobIds(stateDir: string, count: number): Promise<number> {
  mkdirSync(stateDir, { recursive: true });
  const lock = join(stateDir, '.id.lock');
  const counter = join(stateDir, 'next-job-id');
  for (let attempt = 0; ; attempt++) {
    try {
      mkdirSync(lock);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      if (attempt > 400)
        throw new Error(`local scheduler: ${lock} held for over 20 s; remove it if no runner is running`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  try {
    const next = existsSync(counter) ? Number(readFileSync(counter, 'utf8').trim()) : 1;
    writeFileSync(counter, `${next + count}\n`);
    return next;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

export function pidAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
