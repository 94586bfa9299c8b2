// Phases 6 and 7, preflight and submit: every script checked by the scheduler before the first is
// queued (`sbatch --test-only`; local: `bash -n`, CPUs), then queued in dependency order. A refusal
// or a failed submit is recorded in the manifest.
import {
  PreflightError,
  preflightPlan,
  submitPlan,
  type PreflightReport,
  type RenderedJob,
} from '@kdgat/planning';
import type { RunRecord } from '@kdgat/run-record';
import type { Scheduler } from '@kdgat/schedulers';
import type { Site } from './types.ts';

export class SubmissionFailedError extends Error {
  readonly runDir: string;
  constructor(message: string, runDir: string) {
    super(message);
    this.name = 'SubmissionFailedError';
    this.runDir = runDir;
  }
}

/** Preflight: `sbatch --test-only` (local: `bash -n`, CPUs) of every script; a refusal is recorded. */
export async function preflight(
  record: RunRecord,
  rendered: readonly RenderedJob[],
  scheduler: Scheduler,
  site?: Site,
): Promise<PreflightReport[]> {
  // The scripts are read where the scheduler runs: on the site, or in the local directory.
  const dir = site?.files ? record.manifest.runDir : record.dir;
  const reports = await preflightPlan(rendered, dir, scheduler);
  if (reports.some((r) => !r.ok)) {
    const err = new PreflightError(reports);
    record.refused(err.message);
    throw err;
  }
  return reports;
}

/** Submit in dependency order; on a failure the parts already queued are cancelled and recorded. */
export async function submit(
  record: RunRecord,
  rendered: readonly RenderedJob[],
  scheduler: Scheduler,
): Promise<void> {
  const runDir = record.manifest.runDir;
  const submitted = await submitPlan(rendered, runDir, scheduler);
  if (!submitted.error) {
    record.submitted(submitted.jobIds);
    await record.published();
    return;
  }
  const cancelled = submitted.cancelledAfterFailure ?? [];
  record.submitted(submitted.jobIds, { error: submitted.error, cancelled });
  await record.published();
  throw new SubmissionFailedError(
    `${submitted.error}\n  already queued parts cancelled: ${cancelled.join(', ') || 'none'}; see ${record.path}`,
    runDir,
  );
}
