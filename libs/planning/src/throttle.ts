// The run's throttle: one concurrency figure for all its arrays, chunks and shards, within the
// site's per-user limits. SLURM throttles one array at a time (`--array=0-N%K`); a sweep chunked at
// MaxArraySize, a chain of arrays and the user's other runs each add their own K. Here the run's
// figure C (the spec's `concurrency`, else the site's running limit less the user's jobs already
// queued or running) is split between the stages that have arrays, each gets `%floor(C / S)`, and a
// stage's later chunks wait for the chunk before them to end (`afterany`), so that one chunk per
// stage runs at a time. Pure: the user's active jobs are the caller's query.
import type { PlannedJob, RunPlan } from './build.ts';

export interface ThrottleInput {
  /** The spec's `concurrency`. */
  concurrency?: number;
  /** The cluster profile's `limits`. */
  limits: { maxRunningJobsPerUser?: number; maxSubmittedJobsPerUser?: number };
  /** The user's jobs queued or running before this run (array tasks each); absent: unknown. */
  activeJobs?: number;
}

export interface Throttle {
  /** At most this many of the run's tasks run at once; absent: no limit applies. */
  concurrency?: number;
  /** Where the figure came from, for the plan's output and the manifest. */
  why: string;
  /** The run's jobs, array tasks counted one by one (what SLURM counts against the user's limits). */
  tasks: number;
  /** Tasks each array stage runs at once at most (`%K`): the figure split between those stages. */
  perArrayStage?: number;
  /** Keys of the chunks held until the chunk before them ends. */
  held: string[];
  warnings: string[];
}

export class ThrottleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ThrottleError';
  }
}

const tasksOf = (j: PlannedJob) => j.array?.size ?? 1;

/**
 * The throttle of `plan` and the plan with it applied (array concurrencies lowered, later chunks of
 * a stage after the one before them). Throws ThrottleError when the run alone would pass the site's
 * submit limit (sbatch would refuse part of it): nothing is queued then.
 */
export function throttlePlan(plan: RunPlan, input: ThrottleInput): { plan: RunPlan; throttle: Throttle } {
  const tasks = plan.jobs.reduce((n, j) => n + tasksOf(j), 0);
  const active = input.activeJobs;
  const { maxRunningJobsPerUser: running, maxSubmittedJobsPerUser: submitted } = input.limits;
  if (submitted !== undefined && tasks + (active ?? 0) > submitted)
    throw new ThrottleError(
      `this run is ${tasks} jobs (array tasks counted one by one) and ${active ?? 0} of yours are queued or running: ` +
        `more than the site's ${submitted} queued jobs per user (limits.maxSubmittedJobsPerUser), so sbatch would refuse part of it; ` +
        'split the sweep into smaller specs, or wait for your other jobs to end',
    );
  const reasons: string[] = [];
  let figure = Infinity;
  if (input.concurrency !== undefined) {
    figure = input.concurrency;
    reasons.push(`the spec's concurrency ${input.concurrency}`);
  }
  const warnings: string[] = [];
  if (running !== undefined) {
    const room = running - (active ?? 0);
    const site = `the site's ${running} running jobs per user${active === undefined ? '' : ` less ${active} of yours queued or running`}`;
    if (room < 1)
      warnings.push(
        `your ${active} queued or running jobs already fill the site's ${running} running jobs per user: this run's jobs wait for them`,
      );
    if (Math.max(1, room) < figure) {
      figure = Math.max(1, room);
      reasons.unshift(site);
    } else reasons.push(site);
  }
  if (!Number.isFinite(figure)) {
    const none: Throttle = { why: 'no limit', tasks, held: [], warnings };
    return { plan: { ...plan, throttle: none }, throttle: none };
  }

  const arrayStages = [...new Set(plan.jobs.filter((j) => j.array).map((j) => j.stageId))];
  const perStage = arrayStages.length > 0 ? Math.max(1, Math.floor(figure / arrayStages.length)) : figure;
  if (arrayStages.length > figure)
    warnings.push(
      `concurrency ${figure} is below the run's ${arrayStages.length} array stages: each runs 1 task at a time (up to ${arrayStages.length} at once)`,
    );
  const held: string[] = [];
  const lastChunkOf = new Map<string, string>();
  const jobs = plan.jobs.map((job) => {
    if (!job.array) return job;
    const out: PlannedJob = {
      ...job,
      array: { ...job.array, concurrency: Math.min(job.array.concurrency, perStage) },
    };
    const before = lastChunkOf.get(job.stageId);
    if (before !== undefined) {
      out.dependsOn = [...job.dependsOn, before];
      out.afterany = [...(job.afterany ?? []), before];
      held.push(job.key);
    }
    lastChunkOf.set(job.stageId, job.key);
    return out;
  });
  const throttle: Throttle = {
    concurrency: figure,
    ...(arrayStages.length > 0 ? { perArrayStage: perStage } : {}),
    why: `${reasons[0]}${reasons.length > 1 ? ` (within ${reasons.slice(1).join(', ')})` : ''}`,
    tasks,
    held,
    warnings,
  };
  return { plan: { ...plan, jobs, throttle }, throttle };
}

/** What the plan's output says of the throttle: one line, and the held chunks. */
export function throttleLines(t: Throttle, plan: RunPlan): string[] {
  if (t.concurrency === undefined) return [];
  const stages = new Set(plan.jobs.filter((j) => j.array).map((j) => j.stageId)).size;
  const lines = [
    `throttle: at most ${t.concurrency} of this run's ${t.tasks} jobs at once, from ${t.why}` +
      (t.perArrayStage !== undefined
        ? `; each of its ${stages} array stage(s) at most ${t.perArrayStage} task(s) at once`
        : ''),
  ];
  if (t.held.length > 0) lines.push(`  held until the chunk before drains: ${t.held.join(', ')} (afterany)`);
  return [...lines, ...t.warnings.map((w) => `  warning: ${w}`)];
}
