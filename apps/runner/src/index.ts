export { main, USAGE } from './cli/main.ts';
export { buildPlan, chunkSweep, orderStages, type PlannedJob, type RunPlan } from './plan/build.ts';
export { train, type TrainOptions, type TrainResult } from './submit/train.ts';
export { readManifest, type Manifest } from './manifest/manifest.ts';
export {
  FileStackOutputs,
  PulumiStackOutputs,
  type StackOutputs,
  type StackOutputsSource,
} from './stack/outputs.ts';
export { DeclaredStackOutputs, UnprovisionedSlurm, type PredictedStackOutputs } from './stack/declared.ts';
export { EnvironmentChangedError, LOCK_FILE } from './submit/environment-lock.ts';
export type { Scheduler, SubmitRequest, TaskStatus, JobState } from './schedulers/core.ts';
export { SlurmScheduler } from './schedulers/slurm/index.ts';
export { LocalScheduler } from './schedulers/local/index.ts';
export { triageTask, type Triage } from './track/triage.ts';
export { costPlan, BudgetExceededError, type PlanCosting } from './cost/plan-cost.ts';
export { writeReport, summariseRun, verdictLines } from './report/report.ts';
