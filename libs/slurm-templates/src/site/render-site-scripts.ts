/**
 * Site scripts that infra installs once per cluster: the staging script, the epilog, and the generic
 * hand-use job scripts of the original plan (`sbatch train_gpu.sh autoencoder --model vgae …`).
 */
import { DEFAULT_PIPELINE_DECLARATION, RUN_CONTRACT, commandProgram } from '@kdgat/config';
import type { EnvironmentView, LayoutView, PartitionView, ProfileView, RequeuePolicy } from '../inputs.ts';
import { renderEpilog } from '../epilog/render-epilog.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { RULES, joinPath, requireAbsolutePath, requireMatch, requireName } from '../quote/validate.ts';
import { renderStageData, type StageDataOptions } from '../stage-data/render-stage-data.ts';
import { headerLines, jobBodyLines, jobValueLines, sbatchLines } from '../script-sections/script-sections.ts';
import { assign, assignArray } from '../shell/shell-files.ts';
import { jobLibraryPath, type JobLibraryRef } from '../job-library/job-library.ts';

export const SITE_SCRIPT_NAMES = {
  stageData: 'stage_data.sh',
  epilog: 'job_epilog.sh',
  trainGpu: 'train_gpu.sh',
  preprocessGpu: 'preprocess_gpu.sh',
} as const;

export type SiteProfileView = ProfileView & { partitions: PartitionView[]; defaultPartition: string };

export interface SiteScriptOptions {
  /** Where infra installs the scripts (default `<layout.root>/scripts`). */
  scriptsDir?: string;
  /** Walltime of the hand-use scripts (default 4:00:00; `sbatch --time` overrides it). */
  time?: string;
  requeue?: RequeuePolicy;
  gpuSampleSeconds?: number;
  stageData?: StageDataOptions;
  /** The stack that installs the scripts: the job library's error names `infra:up --stack <stack>`. */
  stack?: string;
}

const DEFAULT_REQUEUE: RequeuePolicy = { enabled: true, signal: 'USR1', leadSeconds: 300, maxRestarts: 3 };

/** All site scripts as `{ fileName: text }`, for infra to install into `scriptsDir`. */
export function renderSiteScripts(
  profile: SiteProfileView,
  env: EnvironmentView,
  layout: LayoutView,
  options: SiteScriptOptions = {},
): Record<string, string> {
  return {
    [SITE_SCRIPT_NAMES.stageData]: renderStageData(options.stageData),
    [SITE_SCRIPT_NAMES.epilog]: renderEpilog(profile),
    [SITE_SCRIPT_NAMES.trainGpu]: renderTrainGpu(profile, env, layout, options),
    [SITE_SCRIPT_NAMES.preprocessGpu]: renderPreprocessGpu(profile, env, layout, options),
  };
}

/**
 * The site's installed copy of this version of the job library (`<scriptsDir>/lib/job-<sha>.sh`),
 * installed by the same `pulumi up` as the other site scripts.
 */
export function siteJobLibrary(scriptsDir: string, stack?: string): JobLibraryRef {
  return { path: jobLibraryPath(scriptsDir), fix: jobLibraryInstallFix(stack) };
}

/** What installs the site's job library: the stack's `up`, as a workspace and this checkout spell it. */
export function jobLibraryInstallFix(stack = "<this site's stack>"): string {
  return `install it with the other site scripts: kdgat-runner infra up --stack ${stack} (in the kdgat-hpc checkout: npx nx run infra:up --stack ${stack})`;
}

export function scriptsDirFor(layout: Pick<LayoutView, 'root'>, options: SiteScriptOptions = {}): string {
  return requireAbsolutePath('scriptsDir', options.scriptsDir ?? joinPath(layout.root, 'scripts'));
}

/** The directory holding `<dataset>` caches on scratch: the common parent of layout.cacheDirs. */
export function cacheRootFor(layout: Pick<LayoutView, 'root' | 'cacheDirs'>): string {
  const parents = new Set(
    Object.values(layout.cacheDirs).map((d) => d.replace(/\/+$/, '').replace(/\/[^/]*$/, '')),
  );
  const [only] = parents;
  return requireAbsolutePath(
    'layout.cacheDirs',
    parents.size === 1 && only ? only : joinPath(layout.root, 'cache'),
  );
}

/** `sbatch train_gpu.sh <stage> --model M --scale S --dataset D [-O key value]…`: stages, trains, reports. */
export function renderTrainGpu(
  profile: SiteProfileView,
  env: EnvironmentView,
  layout: LayoutView,
  options: SiteScriptOptions = {},
): string {
  return renderHandScript(profile, env, layout, options, 'train');
}

/** `sbatch preprocess_gpu.sh --model M --scale S --dataset D`: builds the cache on scratch. */
export function renderPreprocessGpu(
  profile: SiteProfileView,
  env: EnvironmentView,
  layout: LayoutView,
  options: SiteScriptOptions = {},
): string {
  return renderHandScript(profile, env, layout, options, 'preprocess');
}

function renderHandScript(
  profile: SiteProfileView,
  env: EnvironmentView,
  layout: LayoutView,
  options: SiteScriptOptions,
  kind: 'train' | 'preprocess',
): string {
  const dir = scriptsDirFor(layout, options);
  const cacheRoot = cacheRootFor(layout);
  const requeue: RequeuePolicy =
    kind === 'train' ? (options.requeue ?? DEFAULT_REQUEUE) : { ...DEFAULT_REQUEUE, enabled: false };
  const usage =
    kind === 'train'
      ? 'usage: sbatch train_gpu.sh STAGE --model M --scale S --dataset D [--run-root DIR] [-O key value]...'
      : 'usage: sbatch preprocess_gpu.sh --model M --scale S --dataset D [--run-root DIR] [-O key value]...';

  const lines: string[] = ['#!/bin/bash'];
  if (profile.scheduler === 'slurm')
    lines.push(...sbatchLines(handDirectives(profile, layout, options, kind, requeue)));
  lines.push(
    `# ${usage.replace('usage: ', 'Usage: ')}`,
    '# sbatch options on the command line override the defaults above.',
    ...headerLines(
      kind === 'train'
        ? `${DEFAULT_PIPELINE_DECLARATION.name} pipeline command run by hand, with staging (P0), GPU sampling and the epilog (P5).`
        : `${DEFAULT_PIPELINE_DECLARATION.name} preprocess stage run by hand: writes the dataset cache to scratch for later staging.`,
      'the experiment spec and the cluster profile',
    ),
    ...jobValueLines({
      profile,
      ...(kind === 'train' ? { stageDataPath: joinPath(dir, 'stage_data.sh') } : {}),
      epilogPath: joinPath(dir, 'job_epilog.sh'),
      requeue,
      gpuSampleSeconds: options.gpuSampleSeconds ?? 10,
      cacheRootVariable: DEFAULT_PIPELINE_DECLARATION.cacheRootVariable,
    }),
    '# The arguments name the stage (train_gpu.sh) and the run; these are the defaults and the usage.',
    assign('hpc_usage', usage),
    assign('hpc_hand_stage', kind === 'train' ? '' : 'preprocess'),
    // The default pipeline's program; the arguments follow it.
    ...assignArray('hpc_hand_program', [commandProgram(DEFAULT_PIPELINE_DECLARATION)]),
    assign('hpc_runs_dir', requireAbsolutePath('layout.runsDir', layout.runsDir)),
    // The run dir <dataset>/<model>_<scale>_<stage>, as the run contract lays it out.
    ...assignArray('hpc_run_name_parts', [RUN_CONTRACT.runDir.nameParts]),
    assign('hpc_run_name_separator', RUN_CONTRACT.runDir.separator),
    // train_gpu.sh stages <cache root>/<dataset>; preprocess_gpu.sh writes the cache there.
    assign('hpc_cache_root', cacheRoot),
    ...assignArray('hpc_stage_datasets', []),
    '',
    ...jobBodyLines(env, profile, siteJobLibrary(dir, options.stack)),
    '',
  );
  return lines.join('\n');
}

function handDirectives(
  profile: SiteProfileView,
  layout: LayoutView,
  options: SiteScriptOptions,
  kind: 'train' | 'preprocess',
  requeue: RequeuePolicy,
): [string, string | number][] {
  const partition = profile.partitions.find((p) => p.name === profile.defaultPartition);
  if (partition === undefined) {
    throw new TemplateInputError(
      'profile.defaultPartition',
      profile.defaultPartition,
      `one of the profile's partitions (${profile.partitions.map((p) => p.name).join(', ')})`,
    );
  }
  const gpusPerNode = Math.max(1, partition.gpusPerNode);
  const d: [string, string | number][] = [['job-name', `${DEFAULT_PIPELINE_DECLARATION.name}-${kind}`]];
  if (profile.account !== undefined && profile.account !== '')
    d.push(['account', requireMatch('profile.account', profile.account, RULES.account)]);
  else if (profile.accountRequired) {
    throw new TemplateInputError(
      'profile.account',
      profile.account,
      `an account: cluster profile ${profile.name} requires --account`,
    );
  }
  d.push(
    ['partition', requireName('profile.defaultPartition', partition.name)],
    ['nodes', 1],
    ['ntasks-per-node', 1],
    ['cpus-per-task', Math.max(1, Math.floor(partition.coresPerNode / gpusPerNode))],
    ['mem', `${Math.max(1, Math.floor(partition.memPerNodeGB / gpusPerNode))}G`],
  );
  if (partition.gpusPerNode > 0) {
    const typed = partition.gpuType
      ? `${requireMatch('partition.gpuType', partition.gpuType, RULES.gpuType)}:1`
      : '1';
    d.push(profile.gpuDirective === 'gres' ? ['gres', `gpu:${typed}`] : ['gpus-per-node', typed]);
  }
  const logs = requireMatch('layout.logsDir', layout.logsDir.replace(/\/+$/, ''), RULES.directivePath);
  d.push(
    ['time', requireMatch('time', options.time ?? '4:00:00', RULES.slurmTime)],
    ['output', `${logs}/%x-%j.out`],
    ['error', `${logs}/%x-%j.err`],
    ['open-mode', 'append'],
  );
  if (requeue.enabled) d.push(['signal', `B:${requeue.signal}@${requeue.leadSeconds}`], ['requeue', '']);
  else d.push(['no-requeue', '']);
  return d;
}
