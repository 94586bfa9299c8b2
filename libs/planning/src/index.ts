// @kdgat/planning: from a validated spec and a stack's outputs to scripts ready to queue —
// the stack outputs, the plan (jobs, arrays chunked to MaxArraySize, chains), its cost, the
// rendered scripts, the study variant of `runner tune`, and preflight + atomic submit.
export {
  FileStackOutputs,
  PulumiStackOutputs,
  StackNotProvisionedError,
  StackOutputsSchema,
  checkEnvironmentMatches,
  type StackOutputs,
  type StackOutputsSource,
} from './stack/outputs.ts';
export {
  DeclaredStackOutputs,
  declaredStackFile,
  readDeclaredSite,
  stackFileLabel,
  type StackConfigs,
  isDeclaredOnly,
  readStackOrDeclared,
  type DeclaredOnly,
  type PredictedStackOutputs,
} from './stack/declared.ts';
export { pythonOf } from './stack/python.ts';
export { checkoutStackConfigs, workspaceBackendEnv } from './stack/configs.ts';
export { readSpecFile } from './spec.ts';
export {
  buildPlan,
  chunkSweep,
  orderStages,
  type ArrayChunk,
  type PlanStage,
  type PlannedJob,
  type RunPlan,
} from './build.ts';
export { ThrottleError, throttleLines, throttlePlan, type Throttle, type ThrottleInput } from './throttle.ts';
export {
  jobLibraryFor,
  jobLibraryNote,
  pipelineOf,
  policiesOf,
  renderPlan,
  runRootOf,
  stageJobEnv,
  writeRendered,
  type JobLibraryUse,
  type RenderedJob,
} from './render.ts';
export {
  BudgetExceededError,
  checkBudget,
  costRecord,
  estimatePlanCost,
  readBalance,
  resubmissionCost,
  sizeStages,
  stageHistories,
  tasksPerStage,
  withRecordedSizes,
  type Balance,
  type CostRecord,
  type PlanCosting,
  type RightSized,
  type Sizing,
} from './cost.ts';
export {
  PreflightError,
  preflightPlan,
  requestFor,
  submitPlan,
  type PreflightReport,
  type SubmissionResult,
} from './submit.ts';
export {
  STUDIES_DIR,
  STUDY_FILE,
  existingStudy,
  resolveStudyDir,
  runTuneReport,
  studyConfig,
  studyLink,
  type BestTrial,
  type StudyReport,
} from './tune/study.ts';
export {
  StudyExistsError,
  asStudyPlan,
  linkStudy,
  refuseTakenStudy,
  studyDirOf,
  writeStudyFile,
} from './tune/study-plan.ts';
export { applyBestTrial, type FromStudy } from './tune/best-trial.ts';
export * from './placement.ts';
