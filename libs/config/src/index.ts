// @kdgat/config — the one contract: schemas and types for clusters, environments, scratch layout
// and experiment specs, their presets and rules, and the loader that reports every problem at once.
import { validateOverrides as validateAgainst, type OverrideProblem } from './experiment/overrides.ts';
import { loadPipelineSchema } from './load/load.ts';

export * from './cluster/schema.ts';
export * from './cluster/charging.ts';
export * from './cluster/presets.ts';
export * from './environment/schema.ts';
export * from './environment/presets.ts';
export * from './environment/render.ts';
export {
  lockPackages,
  diffLocks,
  formatLockDiff,
  type LockDiff,
  type LockPackages,
} from './environment/lock.ts';
export {
  hasCugraphOps,
  rapidsLine,
  cudaOf,
  environmentProblems,
  environmentClusterProblems,
  cudaSupportsGpu,
  rapidsSupportsGpu,
} from './environment/rules.ts';
export {
  GPU_LAYERS,
  GPU_LAYER_NAMES,
  gpuLayerFile,
  gpuLayerPins,
  pipelinePinsFor,
  sitePackages,
  stalePins,
  cudaMajorsOf,
  dependencyMismatches,
  repositorySources,
  type GpuLayerName,
  type PipelineSources,
} from './environment/gpu-layers.ts';
export {
  pipelinePins,
  projectDependencies,
  normaliseName,
  LockfileError,
  type Pin,
} from './environment/uv-lock.ts';
export { evaluateMarker, linuxX86_64, type MarkerEnvironment } from './environment/markers.ts';
export {
  parseMatchSpec,
  formatMatchSpec,
  normaliseMatchSpec,
  type MatchSpec,
} from './environment/matchspec.ts';
export * from './scratch/layout.ts';
export * from './pipeline/pipeline.ts';
export {
  DEFAULT_LOCK_PROJECT,
  DEFAULT_CACHE_ROOT_VARIABLE,
  DEFAULT_DATA_ROOT_VARIABLE,
} from './pipeline/default-package.ts';
export * from './pipeline/job-env.ts';
export {
  CATALOGUE_DIR,
  RUN_CONTRACT,
  RUN_CONTRACT_FILE,
  RunContractSchema,
  parseRunContract,
  STAGE_METRICS,
  runDirName,
  runDirPath,
  type RunContract,
} from './contract/run-contract.ts';
export * from './experiment/schema.ts';
export {
  resolveExperiment,
  expandSweep,
  specHash,
  type Resources,
  type ResolvedStage,
  type ResolvedExperiment,
} from './experiment/resolve.ts';
export {
  TuneSchema,
  SearchParamSchema,
  PrunerSchema,
  DEFAULT_PRUNER,
  type TuneSpec,
  type ResolvedTune,
  type SearchParam,
  type PrunerSpec,
} from './experiment/tune.ts';
export { overrideKeys, overrideDefault, type OverrideProblem } from './experiment/overrides.ts';
export { STAGE_OUTPUTS, resolveStageArgs, type StageOutputRead } from './experiment/stage-args.ts';
export {
  STUDY_SCHEMA,
  STUDY_SCHEMA_FILE,
  validateStudyConfig,
  type StudyConfig,
} from './experiment/study.ts';
export { stageInputProblems, type CacheIdentity, type EarlierOutput } from './experiment/inputs.ts';
export * from './time.ts';
export {
  SCRIPT_VALUES,
  REQUEUE_SIGNALS,
  matchesRule,
  ruleString,
  type ValueRule,
  type ScriptValueKind,
} from './script-values.ts';
export { SpecValidationError, formatIssue, type SpecIssue } from './errors.ts';
export {
  loadExperimentSpec,
  loadPipeline,
  defaultPipeline,
  validateExperiment,
  loadClusterProfile,
  loadEnvironmentSpec,
  loadPipelineSchema,
  checkSpecAgainstSite,
  type LoadedSpec,
} from './load/load.ts';
export { siteProblems, type SiteView } from './experiment/site.ts';
export {
  StackConfigError,
  ENVIRONMENT_FRONTENDS,
  deepMerge,
  siteFromStackConfig,
  presetOrObject,
  rawSiteConfigFromStackFile,
  sitePathsFor,
  siteScriptsDir,
  environmentFilesIn,
  type EnvironmentFrontend,
  type EnvironmentBuild,
  type RawSiteConfig,
  type SiteDeclaration,
  type SiteEnvironment,
  type SitePaths,
} from './site/stack-config.ts';
export {
  StackOutputsSchema,
  StackOutputsObjectSchema,
  StackEnvironmentOutputsSchema,
  StackScratchOutputsSchema,
  StackScriptOutputsSchema,
  stackEnvironment,
  defaultEnvironment,
  type StackOutputs,
  type StackEnvironmentOutputs,
} from './site/stack-outputs.ts';
export { parseYaml } from './load/yaml.ts';
export {
  KernelDeclarationSchema,
  JUPYTER_KERNELS_SUBDIR,
  kernelNameOf,
  kernelsDirFor,
  kernelDefaultCodeFor,
  type KernelDeclaration,
  type KernelDeclarationInput,
} from './site/kernel.ts';
export {
  WORKSPACE_FILE,
  WORKSPACE_VARIABLE,
  WorkspaceFileSchema,
  WorkspaceError,
  readWorkspace,
  findWorkspaceRoot,
  resolveWorkspace,
  stackFileOf,
  inWorkspace,
  ensureHpcDir,
  useWorkspace,
  workspaceRootInUse,
  type Workspace,
  type WorkspaceFile,
} from './workspace/workspace.ts';
export { initWorkspace, detectProject, InitError, TODO, type Detected, type InitResult } from './workspace/init.ts';

/** Problems of dotted-key overrides against the pipeline's JSON Schema (the checked-in one by default). */
export function validateOverrides(
  overrides: Record<string, unknown>,
  schema: object = loadPipelineSchema(),
): OverrideProblem[] {
  return validateAgainst(overrides, schema);
}
