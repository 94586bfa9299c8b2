// @kdgat/runs: one run of `train`, `plan` and `tune` written once (runPipeline and its phases:
// prepare, place, size, cost, guard, record, preflight, submit), following it (`--wait`, resume)
// and `runner shell`'s allocation. The runner app parses flags, calls these and prints.
export type {
  Io,
  OpenedRun,
  Placed,
  Planned,
  Prepared,
  RunCommand,
  RunOptions,
  RunResult,
  Site,
  Sized,
  Spec,
  StudyHooks,
} from './types.ts';
export { UsageError } from './errors.ts';
export { ignoreTuneSection, runPipeline, guardRuns } from './run.ts';
export { prepare, loadSpec, checkStack, logWarnings, schedulerOf } from './prepare.ts';
export { place, specFor, clusterScheduler } from './place.ts';
export { planJobs } from './jobs.ts';
export { size, cost, guardBudget } from './cost.ts';
export { costLines, balanceWarning } from './cost-lines.ts';
export { newRun, shipCode, reproduce } from './record.ts';
export { preflight, submit, SubmissionFailedError } from './queue.ts';
export { configsOf, localRunsRoot, siteRunDirOf } from './paths.ts';
export { follow } from './follow.ts';
export { resume } from './resume.ts';
export { openShell, stageEnvironment, type ShellOptions } from './shell/open.ts';
export { SHELL_DEFAULTS, chargeLines, shellResources, type ShellFlags } from './shell/resources.ts';
