// Preflight and atomic submission of a rendered plan: every script is preflighted before the
// first submit; if a later submit fails, the parts already queued are cancelled.
import { join } from 'node:path';
import type { PlannedJob } from './build.ts';
import type { RenderedJob } from './render.ts';
import { SchedulerError, type Scheduler, type SubmitRequest } from '@kdgat/schedulers';

export function requestFor(
  rendered: RenderedJob,
  runDir: string,
  jobIds: ReadonlyMap<string, string>,
): SubmitRequest {
  const { job, hints, logs } = rendered;
  const idOf = (k: string) => {
    const id = jobIds.get(k);
    if (id === undefined) throw new Error(`job ${job.key} depends on ${k}, which has no job id yet`);
    return id;
  };
  const corr = new Set(job.aftercorr ?? []);
  const any = new Set(job.afterany ?? []);
  const request: SubmitRequest = {
    name: job.name,
    scriptPath: join(runDir, job.scriptFile),
    cwd: runDir,
    dependsOn: job.dependsOn.filter((k) => !corr.has(k) && !any.has(k)).map(idOf),
    cpusPerTask: hints.cpusPerTask,
    timeLimit: hints.timeLimit,
    output: logs.output,
    error: logs.error,
  };
  if (corr.size > 0) request.aftercorr = [...corr].map(idOf);
  if (any.size > 0) request.afterany = [...any].map(idOf);
  if (hints.signal) request.signal = hints.signal;
  if (job.array) request.array = { size: job.array.size, concurrency: job.array.concurrency };
  return request;
}

export interface PreflightReport {
  job: PlannedJob;
  ok: boolean;
  message: string;
}

export class PreflightError extends Error {
  readonly reports: PreflightReport[];
  constructor(reports: PreflightReport[]) {
    const failed = reports.filter((r) => !r.ok);
    super(
      `preflight refused ${failed.length} of ${reports.length} job(s); nothing was submitted:\n` +
        failed.map((r) => `  ${r.job.key} (${r.job.scriptFile}): ${r.message}`).join('\n'),
    );
    this.name = 'PreflightError';
    this.reports = reports;
  }
}

/** `sbatch --test-only` (or the local equivalent) for every script, before anything is queued. */
export async function preflightPlan(
  rendered: readonly RenderedJob[],
  runDir: string,
  scheduler: Scheduler,
): Promise<PreflightReport[]> {
  const reports: PreflightReport[] = [];
  for (const r of rendered) {
    const request = requestFor(
      { ...r, job: { ...r.job, dependsOn: [], aftercorr: [], afterany: [] } },
      runDir,
      new Map(),
    );
    const result = await scheduler.preflight(request);
    reports.push({ job: r.job, ok: result.ok, message: result.message });
  }
  return reports;
}

export interface SubmissionResult {
  jobIds: Map<string, string>;
  error?: string;
  cancelledAfterFailure?: string[];
}

export async function submitPlan(
  rendered: readonly RenderedJob[],
  runDir: string,
  scheduler: Scheduler,
): Promise<SubmissionResult> {
  const jobIds = new Map<string, string>();
  for (const r of rendered) {
    try {
      jobIds.set(r.job.key, await scheduler.submit(requestFor(r, runDir, jobIds)));
    } catch (e) {
      const queued = [...jobIds.values()];
      let cancelError = '';
      try {
        await scheduler.cancel(queued);
      } catch (c) {
        cancelError = `; cancelling ${queued.join(',')} also failed: ${(c as Error).message}`;
      }
      const why =
        e instanceof SchedulerError ? e.message : `submitting ${r.job.key} failed: ${(e as Error).message}`;
      return { jobIds, error: why + cancelError, cancelledAfterFailure: queued };
    }
  }
  return { jobIds };
}
