/**
 * The narrow views of `@kdgat/config` values the renderers read. They mirror docs/CONTRACTS.md field
 * for field (structural types: a full ClusterProfile, ResolvedStage or ScratchLayout is accepted as is),
 * so the templates only depend on the fields they use.
 */
import type { Scalar } from '@kdgat/config';

export type { Scalar };

export interface PartitionView {
  name: string;
  gpuType?: string;
  gpusPerNode: number;
  coresPerNode: number;
  memPerNodeGB: number;
  maxWalltime: string;
}

export interface ProfileView {
  name: string;
  clusterName: string;
  scheduler: 'slurm' | 'local';
  account?: string;
  accountRequired: boolean;
  gpuDirective: 'gres' | 'gpus-per-node';
  /** `init`: the site's Lmod init script, sourced where the shell has no `module` (default /etc/profile.d/lmod.sh). */
  modules: { cuda?: string; conda?: string; init?: string };
  postJobHint?: string;
}

/** Where and how the Python environment is activated (stack output `environment`). */
export interface EnvironmentView {
  name: string;
  /** 'conda': `conda activate <prefix ?? name>`; 'venv': `source <prefix>/bin/activate`. */
  backend: 'conda' | 'venv';
  prefix?: string;
  /**
   * Site modules the environment's interpreter needs (its spec's `modules`), loaded in this order
   * before the activation. Absent or empty: none.
   */
  modules?: readonly string[];
  /**
   * A job only: the pipeline's code where the job runs (the run's snapshot on a site over SSH, a
   * declared pipeline's directory on this machine), imported before the environment's own
   * packages. Absent: the environment's installed pipeline.
   */
  code?: string;
  /** The directories of `code` put first on PYTHONPATH, relative to it (default: `src`). */
  codePaths?: string[];
}

export interface ResourcesView {
  cpus: number;
  memGB: number;
  gpus: { count: number; type?: string };
  nodes: number;
  ntasksPerNode: number;
  time: string;
  partition: string;
  arrayConcurrency: number;
}

export interface StageView {
  id: string;
  stage: string;
  model: string;
  scale: string;
  dataset: string;
  overrides: Record<string, Scalar>;
  resources: ResourcesView;
  /** Words after the pipeline's command (the stage's `args`; `{run_root}`/`{run_dir}` filled by the job). */
  args?: string[];
}

/**
 * The training code a job runs, from its pipeline declaration (`Pipeline` of @kdgat/config):
 * the stage's command with the render-time placeholders filled, and how overrides reach it.
 */
export interface PipelineView {
  name: string;
  /** argv words; `{run_root}` and `{run_dir}` are filled by the job script. */
  command: string[];
  overrideStyle: 'dash-O' | 'hydra' | 'flags';
  /** The environment variable it reads the caches' root from (its declaration's `cacheRootVariable`). */
  cacheRootVariable?: string;
}

export interface LayoutView {
  root: string;
  cacheDirs: Record<string, string>;
  runsDir: string;
  logsDir: string;
}

export interface RequeuePolicy {
  enabled: boolean;
  signal: string;
  leadSeconds: number;
  maxRestarts: number;
  /**
   * Who requeues at the signal: `handshake` (default: the pipeline acknowledges, the job script
   * runs `scontrol requeue`) or `lightning` (the pipeline runs it itself; the script then records
   * the job as requeued when SLURM's restart count rose).
   */
  contract?: 'handshake' | 'lightning';
}

export interface StagingPolicy {
  enabled: boolean;
  datasets: string[];
}

/** Installed paths of the site scripts (stack output `scripts`). */
export interface SiteScriptPaths {
  stageData: string;
  epilog: string;
}

/** A notebook kernel as a stack declares it (`KernelDeclaration` of @kdgat/config). */
export interface KernelView {
  /** Default: the environment's name. */
  name?: string;
  displayName: string;
  /** Lmod modules loaded after the environment's activation. */
  modules?: string[];
  /** A directory holding the default pipeline's `src/`, first on the kernel's PYTHONPATH. */
  code?: string;
}

/** The environment a kernel runs in, as the stack outputs have it (`environments[]` of StackOutputs). */
export interface KernelEnvironmentView {
  name: string;
  /** The activation snippet (stack output `activate`, `activationSnippet`): what a job's activation is. */
  activate: string;
  lockHash: string;
  prefix: string;
}
