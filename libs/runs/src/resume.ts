// `runner resume RUN_DIR` without --wait: one look at the jobs' states, and each ended failure the
// runner can survive (NODE_FAIL, OUT_OF_MEMORY, a CUDA OOM, a TIMEOUT without the requeue
// handshake, the jobs cancelled after them) resubmitted within requeue.maxRecoveries and the
// budget; the others stopped with their triage line.
import { isFailure, type Scheduler } from '@kdgat/schedulers';
import { jobIdsOf, progressOf, recoverRun, statusLine } from '@kdgat/run-record';
import type { OpenedRun } from './types.ts';

/** One look at the run and one recovery of what ended; 1 when a failure stays (stopped). */
export async function resume(
  { record, view }: OpenedRun,
  say: (line: string) => void,
  scheduler: Scheduler,
): Promise<number> {
  const progress = progressOf(record.manifest, await scheduler.query(jobIdsOf(record.manifest)));
  record.seen(progress);
  const outcome = await recoverRun({
    record,
    view,
    progress,
    scheduler,
    say,
    checkpointsHere: view === record.manifest,
  });
  const { plan } = outcome;
  if (plan.active.length > 0) say(`still pending or running (left alone): ${plan.active.join(', ')}`);
  const failed = progress.filter(
    (p) => !outcome.resubmitted.has(p.job.key) && p.tasks.some((t) => isFailure(t.state)),
  );
  if (outcome.resubmitted.size === 0 && failed.length === 0 && plan.active.length === 0) {
    say(`every job of ${record.manifest.experiment} completed: nothing to resume`);
    return 0;
  }
  for (const p of progress) say(`  ${statusLine(p)}`);
  if (outcome.resubmitted.size > 0) say(`follow it: nx run runner:resume ${record.dir} --wait`);
  // 1 while a failure stays (stopped); the resubmitted and running ones are not ended yet.
  return plan.stops.length > 0 ? 1 : 0;
}
