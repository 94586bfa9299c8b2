// Renders the plan's scripts with @kdgat/slurm-templates. Paths inside the scripts are
// relative to the run dir (jobs are submitted from it), so a run reproduced from its manifest
// renders the same bytes in a new run dir.
import { renderTrainJob } from '@kdgat/slurm-templates';
import type { ResolvedExperiment } from '@kdgat/config';
import type { StackOutputs } from '../stack/outputs.ts';
import type { PlannedJob, RunPlan } from './build.ts';

export interface RenderedScript {
  job: PlannedJob;
  text: string;
}

/** Run-dir-relative locations the scripts use; track/ reads the same ones. */
export const RUN_LAYOUT = {
  outputs: 'outputs',
  logs: 'logs',
  pointDir: (globalIndex: number) => `outputs/point-${globalIndex}`,
} as const;

export function renderPlan(plan: RunPlan, resolved: ResolvedExperiment, stack: StackOutputs): RenderedScript[] {
  return plan.jobs.map((job) => {
    const stage = resolved.stages.find((s) => s.id === job.stageId);
    if (!stage) throw new Error(`plan job ${job.key} names stage ${job.stageId}, which the resolved experiment lacks`);
    const rendered = renderTrainJob({
      experiment: resolved,
      stage,
      jobName: job.name,
      stack,
      runRoot: RUN_LAYOUT.outputs,
      logsDir: RUN_LAYOUT.logs,
      ...(job.array && job.points ? { sweep: { points: job.points, firstPoint: job.array.firstPoint } } : {}),
    } as Parameters<typeof renderTrainJob>[0]);
    return { job, text: rendered.script };
  });
}
