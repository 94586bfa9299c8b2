// The jobs of a run: the spec's stages planned (stages → jobs; sweeps → arrays chunked under the
// scheduler's MaxArraySize; tune's study workers), within the run's throttle. Used by prepare and,
// once per cluster of the site, by place.
import type { ResolvedExperiment } from '@kdgat/config';
import { asStudyPlan, buildPlan, throttlePlan, type RunPlan } from '@kdgat/planning';
import type { Scheduler } from '@kdgat/schedulers';
import { jobNameFor } from '@kdgat/slurm-templates';
import type { Spec, StudyHooks } from './types.ts';

/** The jobs: stages in dependency order, sweeps as arrays chunked to MaxArraySize; tune's workers. */
export async function planJobs(spec: Spec, scheduler: Scheduler, study?: StudyHooks): Promise<RunPlan> {
  const { resolved } = spec;
  const experiment = resolved.spec.name;
  const plan = buildPlan({
    experiment,
    specHash: resolved.specHash,
    stages: resolved.stages,
    sweepPoints: resolved.sweepPoints,
    maxArraySize: (await scheduler.limits()).maxArraySize,
    jobName: (stageId) => jobNameFor(experiment, stageId, resolved.pipeline.name),
  });
  if (study) asStudyPlan(plan, study.tune);
  return throttled(plan, spec.resolved, scheduler);
}

/**
 * The run's throttle (libs/planning/src/throttle.ts): the spec's concurrency within the site's
 * per-user limits, less the user's jobs queued or running there now (asked only where the profile
 * declares a limit).
 */
async function throttled(
  plan: RunPlan,
  resolved: ResolvedExperiment,
  scheduler: Scheduler,
): Promise<RunPlan> {
  // A profile recorded before limits were declared has none.
  const limits = (resolved.cluster as Partial<ResolvedExperiment['cluster']>).limits ?? {};
  const siteLimited =
    limits.maxRunningJobsPerUser !== undefined || limits.maxSubmittedJobsPerUser !== undefined;
  const activeJobs = siteLimited ? await scheduler.activeJobsOfUser?.() : undefined;
  const concurrency = resolved.spec.concurrency;
  return throttlePlan(plan, {
    limits,
    ...(concurrency !== undefined ? { concurrency } : {}),
    ...(activeJobs !== undefined ? { activeJobs } : {}),
  }).plan;
}
