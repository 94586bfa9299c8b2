// @kdgat/run-record: what a run leaves and how it is read — the manifest and its one writer
// (RunRecord), the guards before a submit, inputs from earlier runs, following a run, the report,
// the catalogue of all runs and the run's tracking (TensorBoard dirs, tracking-sync).
export {
  MANIFEST_FILE,
  MANIFEST_VERSION,
  gitInfo,
  jobIdsOf,
  environmentOfStage,
  environmentsOf,
  readManifest,
  sha256,
  type EarlierTask,
  type JobAttempt,
  type Manifest,
  type ManifestEnvironment,
  type ManifestJob,
} from './manifest.ts';
export {
  RunRecord,
  newManifest,
  reproductionOf,
  scriptHashes,
  type NewRun,
  type Reproduction,
} from './record.ts';
export { newRunDir, RUNS_LOCK_FILE } from './run-dir.ts';
export {
  ActiveRunCheckError,
  AlreadyQueuedError,
  earlierRuns,
  refuseActiveRuns,
  schedulerForManifest,
} from './active-runs.ts';
export { acquireLock, type HeldLock } from './runs-lock.ts';
export {
  EnvironmentChangedError,
  LOCK_FILE,
  compareRecordedLocks,
  copyLocksIntoRun,
  lockFileOf,
} from './environment-lock.ts';
export {
  StageInputError,
  linkStageInputs,
  resolveStageInputs,
  type ResolvedInput,
  type SiteCopies,
} from './inputs/inputs.ts';
export {
  efficiencyOf,
  formatElapsed,
  formatTable,
  jobStateOf,
  progressOf,
  rememberStates,
  statusLine,
  summaryRows,
  taskKey,
  taskRunRoot,
  type JobProgress,
  type SummaryRow,
} from './track/track.ts';
export { HEARTBEAT_MS, WaitOutput, watchRun, type Output, type WatchOptions } from './track/watch.ts';
export { findMetrics, keyMetrics, logPathsOf, tailFile, tailLogs } from './track/files.ts';
export { printable } from './track/printable.ts';
export { triageTask, type Triage, type TriageKind } from './track/triage.ts';
export {
  REPORT_DIR,
  summariseRun,
  verdictLines,
  writeReport,
  type ReportResult,
  type StageSummary,
} from './report.ts';
export {
  COPY_EXCLUDES,
  SITE_COPY_FILE,
  connectionOf,
  copyLine,
  isRemote,
  localView,
  refreshCopy,
  siteFilesOf,
  type CopyState,
} from './site/site-copy.ts';
export {
  CODE_DIFF_FILE,
  CODE_PATH,
  DirtyTreeError,
  codeSnapshot,
  codeSourceOf,
  materializeGitCode,
  type CodeSource,
  snapshotDir,
  uploadSnapshot,
  type CodeSnapshot,
} from './code/snapshot.ts';
export {
  decideRecovery,
  maxRecoveriesOf,
  type RecoveryCause,
  type RecoveryInput,
  type RecoveryPlan,
  type RecoveryStop,
  type Resubmission,
  type TaskFacts,
} from './recovery/decide.ts';
export { epochEndsOf, recordOf, taskFacts } from './recovery/facts.ts';
export { recoverRun, resubmissionRequest, type RecoveryOutcome } from './recovery/apply.ts';
export {
  catalogueOfRun,
  catalogueOfRunsRoot,
  pullCatalogue,
  runsTable,
  type RunsAnswer,
  type RunsQuery,
} from './catalogue.ts';
export {
  SYNC_TIMEOUT_S,
  TENSORBOARD_DIR,
  syncEnvironment,
  syncTracking,
  tensorboardDirs,
  trackingSyncArgv,
  trackingSyncScript,
} from './tracking.ts';
export { anyOutput, expandOutput, mergeCsv, naturalCompare } from './outputs.ts';
