// What a failed task left in its pipeline run dir and logs, for decideRecovery: its job record
// (this submission's line of job_record.jsonl), the log tail, history.csv's epoch times, the
// requeue acknowledgement, and whether the checkpoint the pipeline declares (the default one's
// checkpoints/last.ckpt; a pattern such as Lightning's hpc_ckpt_*.ckpt) is there.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { RUN_CONTRACT, outputPatterns } from '@kdgat/config';
import type { TaskStatus } from '@kdgat/schedulers';
import { readJobRecords, tasksOfRun, type JobRecord } from '@kdgat/usage';
import type { Manifest, ManifestJob } from '../manifest.ts';
import { tailLogs } from '../track/files.ts';
import type { TaskFacts } from './decide.ts';
import { expandOutput } from '../outputs.ts';

/** The checkpoint patterns of the run's pipeline (a manifest of the default one: the run contract's). */
export function checkpointPatterns(manifest: Pick<Manifest, 'resolved'>): string[] {
  const declared = (manifest.resolved as { pipeline?: { outputs?: { checkpoint?: string | string[] } } })
    .pipeline?.outputs?.checkpoint;
  const patterns = outputPatterns(declared);
  return patterns.length > 0 ? patterns : [RUN_CONTRACT.runDir.files.checkpoint];
}

/** The newest file in `dir` that one of `patterns` names, relative to `dir`; undefined: none. */
export function newestCheckpoint(dir: string, patterns: readonly string[]): string | undefined {
  const files = patterns.flatMap((p) => expandOutput(dir, p));
  const newest = files.map((f) => ({ f, t: statSync(f).mtimeMs })).sort((a, b) => b.t - a.t)[0];
  return newest ? relative(dir, newest.f) : undefined;
}

/** The epilog's record of this very submission of the task, when it wrote one. */
export function recordOf(records: readonly JobRecord[], task: TaskStatus): JobRecord | undefined {
  const mine = records.filter((r) =>
    task.arrayIndex === undefined
      ? r.jobId === task.jobId
      : r.jobId === task.taskJobId ||
        (r.arrayJobId === task.jobId && r.arrayTaskId === String(task.arrayIndex)),
  );
  return mine.at(-1);
}

function checkpointFacts(
  dir: string,
  patterns: readonly string[],
): Pick<TaskFacts, 'checkpoint' | 'checkpointFile'> {
  const file = newestCheckpoint(dir, patterns);
  return file === undefined ? { checkpoint: false } : { checkpoint: true, checkpointFile: file };
}

/** `time` of every row of history.csv (epoch seconds), in order; [] without the file. */
export function epochEndsOf(historyText: string): number[] {
  const [header, ...rows] = historyText.split('\n').filter((l) => l.trim() !== '');
  const col = (header ?? '').split(',').indexOf('time');
  if (col < 0) return [];
  return rows.map((r) => Number(r.split(',')[col])).filter((t) => Number.isFinite(t) && t > 0);
}

/**
 * Reads a task's facts under `manifest` (the local view of a site's run: its paths point into the
 * copy, where checkpoints are not brought: `checkpointsHere` false leaves `checkpoint` unknown).
 */
export function taskFacts(
  manifest: Manifest,
  job: ManifestJob,
  task: TaskStatus,
  options: { checkpointsHere: boolean },
): TaskFacts {
  const viewJob = manifest.jobs.find((j) => j.key === job.key) ?? job;
  const dirs = tasksOfRun({ ...manifest, jobs: [viewJob] });
  const dir = dirs.find((d) => d.index === (task.arrayIndex ?? null))?.dir;
  let logTail = '';
  try {
    logTail = tailLogs(viewJob, task, 80);
  } catch {
    // no log (the job never started, or the log was removed): decided from the state alone
  }
  if (!dir) return { logTail, epochEnds: [] };
  const ack = join(dir, RUN_CONTRACT.requeue.ackFile);
  let ackTime: number | undefined;
  if (existsSync(ack)) {
    try {
      const t = (JSON.parse(readFileSync(ack, 'utf8')) as { time?: unknown }).time;
      if (typeof t === 'number') ackTime = t;
    } catch {
      // a half-written acknowledgement acknowledges nothing
    }
  }
  const history = join(dir, RUN_CONTRACT.runDir.files.history);
  const record = recordOf(readJobRecords(dir), task);
  return {
    logTail,
    ...(record ? { record } : {}),
    ...(ackTime !== undefined ? { ackTime } : {}),
    epochEnds: existsSync(history) ? epochEndsOf(readFileSync(history, 'utf8')) : [],
    ...(options.checkpointsHere ? checkpointFacts(dir, checkpointPatterns(manifest)) : {}),
  };
}
