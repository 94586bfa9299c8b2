export { shq } from './quote/shq.ts';
export { TemplateInputError } from './quote/errors.ts';
export {
  renderTrainJob,
  jobNameFor,
  type TrainJobInput,
  type RenderedTrainJob,
} from './train-job/render-train-job.ts';
export { encodeArrayTable, encodeTableValue } from './train-job/array-table.ts';
export {
  activationSnippet,
  DEFAULT_LMOD_INIT,
  loginModules,
  renderModuleShell,
  REQUEUE_EXIT_STATUS,
} from './script-sections/script-sections.ts';
export {
  JOB_LIBRARY,
  JOB_LIBRARY_DIR,
  jobLibraryPath,
  type JobLibraryRef,
} from './job-library/job-library.ts';
export { renderStageData, type StageDataOptions } from './stage-data/render-stage-data.ts';
export {
  renderInteractiveShell,
  type InteractiveShellInput,
  type RenderedInteractiveShell,
} from './interactive/render-interactive-shell.ts';
export { renderEpilog } from './epilog/render-epilog.ts';
export {
  renderSiteScripts,
  siteJobLibrary,
  jobLibraryInstallFix,
  renderTrainGpu,
  renderPreprocessGpu,
  cacheRootFor,
  scriptsDirFor,
  SITE_SCRIPT_NAMES,
  type SiteProfileView,
  type SiteScriptOptions,
} from './site/render-site-scripts.ts';
export {
  declaredSiteOutputs,
  siteClustersOutput,
  environmentModulesOutput,
  siteJobEnvironment,
  siteJobLibraryOutput,
  type DeclaredSiteOutputs,
} from './site/site-outputs.ts';
export {
  renderKernelFiles,
  kernelDirFor,
  KERNEL_LOCK_HASH_VARIABLE,
  type KernelFiles,
  type KernelFilesInput,
  type RenderedKernel,
} from './site/kernel.ts';
// A jupyter_client driver the kernel tests start kernels with (here and on the box).
export { JUPYTER_DRIVER } from './site/jupyter-driver.ts';
export type * from './inputs.ts';
