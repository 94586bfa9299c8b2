// Carrying out a recovery plan: each resubmission queued in order (its dependencies on the jobs
// resubmitted before it), recorded in the manifest as an attempt, and said in one line; each stop
// recorded and said with its triage line. Thin: the decisions are decide.ts's.
import { join } from 'node:path';
import type { ResolvedExperiment } from '@kdgat/config';
import { policiesOf } from '@kdgat/planning';
import { SchedulerError, type Scheduler, type SubmitRequest } from '@kdgat/schedulers';
import type { Manifest, ManifestJob } from '../manifest.ts';
import type { RunRecord } from '../record.ts';
import type { JobProgress } from '../track/track.ts';
import { decideRecovery, type RecoveryPlan, type Resubmission, type TaskFacts } from './decide.ts';
import { taskFacts } from './facts.ts';

export interface RecoveryOutcome {
  plan: RecoveryPlan;
  /** New job ids by plan key. */
  resubmitted: Map<string, string>;
  /** Lines printed for the stops (and for resubmissions the scheduler refused). */
  stopLines: string[];
}

/** The request of a resubmission: the job's script in its run dir, as submitted first, plus the options. */
export function resubmissionRequest(
  manifest: Manifest,
  job: ManifestJob,
  r: Resubmission,
  newIds: ReadonlyMap<string, string>,
): SubmitRequest {
  const resolved = manifest.resolved as ResolvedExperiment;
  const stage = resolved.stages.find((s) => s.id === job.stageId);
  const { requeue } = policiesOf(resolved);
  const idOf = (k: string) => {
    const id = newIds.get(k);
    if (id === undefined) throw new Error(`job ${job.key} waits for ${k}, whose resubmission has no job id`);
    return id;
  };
  const aftercorr = [...r.aftercorrKeys.map(idOf), ...r.aftercorrIds];
  return {
    name: job.name,
    scriptPath: join(manifest.runDir, job.script),
    cwd: manifest.runDir,
    dependsOn: [...r.afterokKeys.map(idOf), ...r.afterokIds],
    ...(aftercorr.length > 0 ? { aftercorr } : {}),
    ...(job.array ? { array: { size: job.array.size, concurrency: job.array.concurrency } } : {}),
    ...(stage ? { cpusPerTask: stage.resources.cpus, timeLimit: stage.resources.time } : {}),
    ...(requeue.enabled ? { signal: `B:${requeue.signal}@${requeue.leadSeconds}` } : {}),
    output: job.logs.output,
    error: job.logs.error,
    overrides: r.options,
  };
}

/**
 * Decides on a run whose jobs ended (`progress`), queues the resubmissions on `scheduler`, records
 * every attempt and stop in `record`, and prints one line each to `say`. `view` is the manifest
 * whose paths point where the run's files are read here (a site's local copy).
 */
export async function recoverRun(input: {
  record: RunRecord;
  view: Manifest;
  progress: readonly JobProgress[];
  scheduler: Scheduler;
  say: (line: string) => void;
  /** Checkpoints are in the run dir here (not a site's copy). */
  checkpointsHere: boolean;
  /** Tests give their own facts. */
  facts?: (job: ManifestJob, task: Parameters<typeof taskFacts>[2]) => TaskFacts;
  now?: () => Date;
}): Promise<RecoveryOutcome> {
  const { record, scheduler, say } = input;
  const manifest = record.manifest;
  const facts =
    input.facts ??
    ((job, task) => taskFacts(input.view, job, task, { checkpointsHere: input.checkpointsHere }));
  const plan = decideRecovery({ manifest, progress: input.progress, facts });
  const now = () => (input.now ?? (() => new Date()))().toISOString();
  const newIds = new Map<string, string>();
  const stopLines: string[] = [];
  const stop = (key: string, s: NonNullable<ManifestJob['stopped']>, line: string) => {
    record.stoppedRecovery(key, s);
    stopLines.push(line);
    say(line);
  };
  for (const s of plan.stops)
    stop(
      s.key,
      {
        jobId: s.jobId,
        ...(s.tasks ? { tasks: s.tasks } : {}),
        state: s.state,
        cause: s.cause,
        reason: s.line.split('\n')[0]!,
        at: now(),
      },
      s.line,
    );
  for (const r of plan.resubmit) {
    const job = manifest.jobs.find((j) => j.key === r.key)!;
    const waitsFor = [...r.afterokKeys, ...r.aftercorrKeys].filter((k) => !newIds.has(k));
    if (waitsFor.length > 0) {
      stop(
        r.key,
        {
          jobId: r.failedJobId,
          state: r.state,
          cause: 'DEPENDENCY',
          reason: `${waitsFor.join(', ')} was not resubmitted`,
          at: now(),
        },
        `${r.head}: stopped: it waits for ${waitsFor.join(', ')}, whose resubmission failed`,
      );
      continue;
    }
    let id: string;
    try {
      id = await scheduler.submit(resubmissionRequest(manifest, job, r, newIds));
    } catch (e) {
      if (!(e instanceof SchedulerError)) throw e;
      stop(
        r.key,
        { jobId: r.failedJobId, state: r.state, cause: 'REFUSED', reason: e.message, at: now() },
        `${r.head}: stopped: the resubmission was refused: ${e.message}`,
      );
      continue;
    }
    newIds.set(r.key, id);
    const note = `${r.head}: resubmitted as ${id}${r.what ? ` ${r.what}` : ''}`;
    record.recovered(
      r.key,
      {
        jobId: r.failedJobId,
        ...(r.tasks ? { tasks: r.tasks } : {}),
        state: r.state,
        cause: r.cause,
        action: 'resubmitted',
        options: r.options,
        resubmittedAs: id,
        at: now(),
        worstUnits: r.worstUnits,
        note,
      },
      r.earlierTasks,
    );
    say(note);
  }
  await record.published();
  return { plan, resubmitted: newIds, stopLines };
}
