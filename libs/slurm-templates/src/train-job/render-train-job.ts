/**
 * The per-run SLURM job script (one run, or an array over sweep points), in the manner of submitit's
 * `_make_sbatch_string`: a pure function from validated config values to text.
 */
import {
  DEFAULT_PIPELINE_DECLARATION,
  DEFAULT_PIPELINE_NAME,
  SITE_HELPER_MODULE,
  OVERRIDE_STYLES,
  RUN_CONTRACT,
  overrideWords,
  parseSlurmTime,
  runDirPath,
  stageCommand,
} from '@kdgat/config';
import type {
  EnvironmentView,
  LayoutView,
  PartitionView,
  PipelineView,
  ProfileView,
  RequeuePolicy,
  Scalar,
  SiteScriptPaths,
  StageView,
  StagingPolicy,
} from '../inputs.ts';
import { TemplateInputError } from '../quote/errors.ts';
import {
  RULES,
  requireAbsolutePath,
  requireMatch,
  requireName,
  requirePositiveInt,
} from '../quote/validate.ts';
import {
  checkRequeuePolicy,
  headerLines,
  jobBodyLines,
  jobEnvLines,
  jobValueLines,
  sbatchLines,
} from '../script-sections/script-sections.ts';
import { encodeArrayTable, scalarText } from './array-table.ts';
import { assign, assignArray } from '../shell/shell-files.ts';
import type { JobLibraryRef } from '../job-library/job-library.ts';

export interface TrainJobInput {
  /** Experiment name as the user wrote it (any text; the job name uses a slug of it). */
  experiment: string;
  stage: StageView;
  /** The code the stage runs (its pipeline declaration); absent: the default pipeline's. */
  pipeline?: PipelineView;
  profile: ProfileView;
  /** Used only to default the GPU type of `--gres` when the stage names none. */
  partition?: Pick<PartitionView, 'gpuType'>;
  environment: EnvironmentView;
  layout: Pick<LayoutView, 'cacheDirs' | 'logsDir'>;
  /** `--run-root` of this run; array task i runs under `<runRoot>/point_<i>`. */
  runRoot: string;
  scripts: SiteScriptPaths;
  /**
   * This version of the job library (`JOB_LIBRARY`), where the job finds it: the site's installed
   * copy, or the run's own; and what its error says to do when the file is missing or differs.
   */
  jobLibrary: JobLibraryRef;
  requeue: RequeuePolicy;
  staging: StagingPolicy;
  /** Sweep points: a job array with one task per point when non-empty. */
  sweepPoints?: Record<string, Scalar>[];
  /**
   * Global index of task 0 when the sweep is split into chunks at MaxArraySize (default 0): task i
   * runs under `<runRoot>/point_<firstPoint + i>`, where the next stage's chunk looks for it.
   */
  firstPoint?: number;
  /** Absolute path where the caller writes `arrayTable` (next to the script); required for arrays. */
  arrayTablePath?: string;
  /**
   * Run dirs (below `runRoot`) of the stages outside the sweep that this swept stage comes after:
   * each array task links them into its own point root, where the pipeline looks for them.
   */
  sharedRunDirs?: string[];
  /**
   * A hyperparameter study's workers instead of a stage run: a job array of `workers` tasks, each
   * running the default pipeline's `tune --study-dir <studyDir>` under `<runRoot>/worker_<i>`.
   */
  tune?: { studyDir: string; workers: number };
  /**
   * A sharded stage: its array of `count` shard tasks (`task`), each exporting the run contract's
   * shard index and count and running under `<runRoot>/shard_<i>`; or (`task`: false) the join
   * job after them, exporting the count alone.
   */
  shards?: { count: number; task: boolean };
  /** Seconds between GPU samples (default 10). */
  gpuSampleSeconds?: number;
  /**
   * Variables the job exports before its command (the pipeline's, the stack's and the stage's
   * `env`, then the raw-data variable: `jobEnvironment` of @kdgat/config), in order.
   */
  jobEnv?: readonly (readonly [string, string])[];
}

export interface RenderedTrainJob {
  script: string;
  /** Rendered overrides table for arrays (see array-table.ts), written to `arrayTablePath`. */
  arrayTable?: string;
}

export function renderTrainJob(input: TrainJobInput): RenderedTrainJob {
  const { stage, profile } = input;
  const r = stage.resources;
  for (const f of ['id', 'stage', 'model', 'scale', 'dataset'] as const) requireName(`stage.${f}`, stage[f]);
  checkRequeuePolicy(input.requeue);
  const points = input.sweepPoints ?? [];
  const tune = input.tune;
  if (tune && points.length > 0)
    throw new TemplateInputError('tune', 'with sweepPoints', 'either sweep points or a tune study, not both');
  const workers = tune ? requirePositiveInt('tune.workers', tune.workers) : 0;
  const studyDir = tune ? requireAbsolutePath('tune.studyDir', tune.studyDir) : '';
  const shards = input.shards;
  if (shards && (tune || points.length > 0))
    throw new TemplateInputError('shards', 'with sweepPoints or tune', 'a sharded stage on its own');
  const shardCount = shards ? requirePositiveInt('shards.count', shards.count) : 0;
  const shardTasks = shards?.task === true ? shardCount : 0;
  const arraySize = tune ? workers : shardTasks > 0 ? shardTasks : points.length;
  const isArray = points.length > 0;
  const pipeline = input.pipeline ?? DEFAULT_PIPELINE_VIEW;
  const jobName = jobNameFor(input.experiment, stage.id, pipeline.name);
  const runSubdir = runDirPath(stage);
  const runRoot = requireAbsolutePath('runRoot', input.runRoot);
  const multiTask = r.nodes > 1 || r.ntasksPerNode > 1;

  const lines: string[] = ['#!/bin/bash'];
  if (profile.scheduler === 'slurm') {
    lines.push(...sbatchLines(directivesFor(input, jobName, arraySize)));
  } else {
    lines.push(
      '# Local executor: the runner runs this script with bash and SLURM_* variables it emulates; no #SBATCH lines.',
      `# Resources requested: ${describeResources(r)}.`,
    );
  }
  lines.push(
    ...headerLines(
      tune
        ? `${pipeline.name} ${stage.stage} study (${jobName}), array of ${workers} tune workers`
        : shards
          ? `${pipeline.name} ${stage.stage} (${jobName}), ${shards.task ? `array of ${shardCount} shard tasks` : `join of ${shardCount} shards`}`
          : `${pipeline.name} ${stage.stage} (${jobName})${isArray ? `, array of ${points.length} sweep points` : ''}`,
      'the experiment spec and the cluster profile',
    ),
    ...jobValueLines({
      profile,
      stageDataPath: input.staging.enabled ? input.scripts.stageData : undefined,
      epilogPath: input.scripts.epilog,
      requeue: input.requeue,
      gpuSampleSeconds: input.gpuSampleSeconds ?? 10,
      cacheRootVariable: pipeline.cacheRootVariable,
    }),
    assign('hpc_experiment', input.experiment),
    assign('hpc_stage_id', stage.id),
    assign('hpc_run_root', runRoot),
    assign('hpc_run_subdir', runSubdir),
  );

  let arrayTable: string | undefined;
  if (isArray) {
    if (input.arrayTablePath === undefined) {
      throw new TemplateInputError(
        'arrayTablePath',
        undefined,
        'an absolute path for the sweep table of an array job',
      );
    }
    arrayTable = encodeArrayTable(points);
    lines.push(
      '# Array task i reads its overrides from this table (read as data, never evaluated).',
      assign('hpc_array_table', requireAbsolutePath('arrayTablePath', input.arrayTablePath)),
      assign('hpc_array_size', points.length),
      ...(input.sharedRunDirs?.length
        ? [
            "# Stages that ran once for every point: their run dirs, linked into each task's root.",
            ...assignArray(
              'hpc_shared_run_dirs',
              input.sharedRunDirs.map((d) => [requireMatch('sharedRunDirs[]', d, RULES.codePath)]),
            ),
          ]
        : []),
      assign(
        'hpc_first_point',
        input.firstPoint === undefined || input.firstPoint === 0
          ? 0
          : requirePositiveInt('firstPoint', input.firstPoint),
      ),
    );
  }
  if (tune) lines.push(assign('hpc_tune_workers', workers));
  if (shards)
    lines.push(
      shards.task
        ? '# Shard task i of hpc_shard_count builds its share of the recordings (run contract: shards).'
        : '# The join of hpc_shard_count shards into the cache (run contract: shards).',
      assign('hpc_shard_count', shardCount),
      assign('hpc_shard_task', shards.task ? 1 : 0),
      assign('hpc_shard_index_env', RUN_CONTRACT.shards.indexEnv),
      assign(RUN_CONTRACT.shards.countEnv, shardCount, true),
    );
  lines.push(
    ...recordLines(stage),
    ...jobEnvLines(input.jobEnv ?? []),
    ...stagingLines(input),
    ...(tune ? tuneCommandLines(studyDir) : commandLines(stage, pipeline, multiTask)),
    '',
    ...jobBodyLines(input.environment, profile, input.jobLibrary),
    '',
  );
  return { script: lines.join('\n'), ...(arrayTable === undefined ? {} : { arrayTable }) };
}

/**
 * What the epilog writes into the job record next to what the job used (key=value words): cpus per
 * task, memory per node, GPUs and tasks in the whole job (the record's CPU time is the whole job's).
 */
function recordLines(stage: StageView): string[] {
  const r = stage.resources;
  const time = requireMatch('resources.time', r.time, RULES.slurmTime);
  const tasks =
    requirePositiveInt('resources.nodes', r.nodes) *
    requirePositiveInt('resources.ntasksPerNode', r.ntasksPerNode);
  const request =
    `cpus=${requirePositiveInt('resources.cpus', r.cpus)} memGB=${r.memGB} gpus=${r.gpus.count * r.nodes} ` +
    `timeSeconds=${parseSlurmTime(time)} partition=${requireName('resources.partition', r.partition)} tasks=${tasks}`;
  const who = `stageId=${stage.id} stage=${stage.stage} model=${stage.model} scale=${stage.scale} dataset=${stage.dataset}`;
  return [
    '# What this job asked for, for the record the epilog leaves in the run dir (job_record.jsonl).',
    assign('HPC_RECORD_REQUEST', request, true),
    assign('HPC_RECORD_STAGE', who, true),
  ];
}

/** `<pipeline>-<experiment slug>-<stage id>`: the experiment name may be any text, job names may not. */
export function jobNameFor(
  experiment: string,
  stageId: string,
  pipelineName: string = DEFAULT_PIPELINE_NAME,
): string {
  const slug = experiment
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '') // accents off: ü -> u
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[-.]+|-+$/g, '')
    .slice(0, 48);
  return requireMatch(
    'job name',
    `${pipelineName}-${slug === '' ? 'x' : slug}-${stageId}`.replace(/--+/g, '-'),
    RULES.jobName,
  );
}

function describeResources(r: StageView['resources']): string {
  return `${r.nodes} node(s) x ${r.ntasksPerNode} task(s), ${r.cpus} cpus/task, ${r.memGB} GB, ${r.gpus.count} GPU(s)/node, ${r.time}`;
}

function directivesFor(
  input: TrainJobInput,
  jobName: string,
  arraySize: number,
): [string, string | number][] {
  const { profile, stage, requeue } = input;
  const r = stage.resources;
  const d: [string, string | number][] = [
    ['job-name', jobName],
    ...allocationDirectives(profile, r, input.partition?.gpuType),
  ];
  const logs = requireMatch('layout.logsDir', input.layout.logsDir.replace(/\/+$/, ''), RULES.directivePath);
  const pattern = arraySize > 0 ? '%x-%A_%a' : '%x-%j';
  d.push(['output', `${logs}/${pattern}.out`], ['error', `${logs}/${pattern}.err`], ['open-mode', 'append']);
  if (requeue.enabled) d.push(['signal', `B:${requeue.signal}@${requeue.leadSeconds}`], ['requeue', '']);
  else d.push(['no-requeue', '']);
  if (input.tune) {
    // nWorkers is the parallelism: all of them at once, unless the run's throttle lowered it.
    const k = r.arrayConcurrency;
    d.push(['array', `0-${arraySize - 1}${Number.isInteger(k) && k > 0 && k < arraySize ? `%${k}` : ''}`]);
  } else if (arraySize > 0) {
    const k = r.arrayConcurrency;
    d.push(['array', `0-${arraySize - 1}${Number.isInteger(k) && k > 0 && k < arraySize ? `%${k}` : ''}`]);
  }
  return d;
}

/**
 * What a job of these resources asks SLURM for, as `[option, value]` pairs in the job script's order:
 * account, partition, nodes, tasks per node, cpus per task, memory, GPUs, time. The job script's
 * `#SBATCH` lines and the allocation of `runner shell` are both made of these.
 */
export function allocationDirectives(
  profile: Pick<ProfileView, 'name' | 'account' | 'accountRequired' | 'gpuDirective'>,
  r: StageView['resources'],
  partitionGpuType: string | undefined,
): [string, string | number][] {
  const d: [string, string | number][] = [];
  if (profile.account !== undefined && profile.account !== '')
    d.push(['account', requireMatch('profile.account', profile.account, RULES.account)]);
  else if (profile.accountRequired)
    throw new TemplateInputError(
      'profile.account',
      profile.account,
      `an account: cluster profile ${profile.name} requires --account`,
    );
  d.push(
    ['partition', requireName('resources.partition', r.partition)],
    ['nodes', requirePositiveInt('resources.nodes', r.nodes)],
    ['ntasks-per-node', requirePositiveInt('resources.ntasksPerNode', r.ntasksPerNode)],
    ['cpus-per-task', requirePositiveInt('resources.cpus', r.cpus)],
    ['mem', memDirective(r.memGB)],
  );
  const gpu = gpuDirective(profile, r.gpus, partitionGpuType);
  if (gpu !== undefined) d.push(gpu);
  d.push(['time', requireMatch('resources.time', r.time, RULES.slurmTime)]);
  return d;
}

function memDirective(memGB: number): string {
  if (!Number.isFinite(memGB) || memGB <= 0)
    throw new TemplateInputError('resources.memGB', memGB, 'a positive number of GB');
  return Number.isInteger(memGB) ? `${memGB}G` : `${Math.ceil(memGB * 1024)}M`;
}

function gpuDirective(
  profile: Pick<ProfileView, 'gpuDirective'>,
  gpus: StageView['resources']['gpus'],
  partitionGpuType: string | undefined,
): [string, string] | undefined {
  if (gpus.count === 0) return undefined;
  requirePositiveInt('resources.gpus.count', gpus.count);
  const type = gpus.type ?? partitionGpuType;
  const typed =
    type === undefined || type === ''
      ? `${gpus.count}`
      : `${requireMatch('resources.gpus.type', type, RULES.gpuType)}:${gpus.count}`;
  if (profile.gpuDirective === 'gres') return ['gres', `gpu:${typed}`];
  if (profile.gpuDirective === 'gpus-per-node') return ['gpus-per-node', typed];
  throw new TemplateInputError('profile.gpuDirective', profile.gpuDirective, "'gres' or 'gpus-per-node'");
}

/** The default pipeline's study worker (@kdgat/config refuses a tune study for another pipeline). */
function tuneCommandLines(studyDir: string): string[] {
  return [
    ...assignArray('hpc_cmd', [
      ['python', '-m', SITE_HELPER_MODULE, 'tune', '--study-dir', studyDir, '--run-root', '{run_root}'],
    ]),
    ...assignArray('hpc_overrides', []),
  ];
}

/** What a job runs when the caller names no pipeline: the default pipeline's declaration. */
export const DEFAULT_PIPELINE_VIEW: PipelineView = {
  name: DEFAULT_PIPELINE_DECLARATION.name,
  command: DEFAULT_PIPELINE_DECLARATION.command,
  overrideStyle: DEFAULT_PIPELINE_DECLARATION.overrides,
  ...(DEFAULT_PIPELINE_DECLARATION.cacheRootVariable !== undefined
    ? { cacheRootVariable: DEFAULT_PIPELINE_DECLARATION.cacheRootVariable }
    : {}),
};

/**
 * What a job stages (`hpc_stage_datasets`) or, staging nothing, where it reads the caches
 * (`hpc_cache_root`): for `hpc_stage_caches` of src/shell/job-run.sh, in a job script and in
 * the init of `runner shell`.
 */
export function stagingLines(input: {
  staging: StagingPolicy;
  layout: Pick<LayoutView, 'cacheDirs'>;
  stage: Pick<StageView, 'stage' | 'dataset'>;
}): string[] {
  const { staging, layout } = input;
  const cacheDirFor = (ds: string): string => {
    requireName('staging.datasets[]', ds);
    const dir = layout.cacheDirs[ds];
    if (dir === undefined) {
      throw new TemplateInputError(
        `layout.cacheDirs.${ds}`,
        dir,
        `a scratch cache dir for dataset ${ds} (known: ${Object.keys(layout.cacheDirs).join(', ') || 'none'})`,
      );
    }
    return requireAbsolutePath(`layout.cacheDirs.${ds}`, dir);
  };
  const scratchRoot = (): string => {
    const dir = cacheDirFor(input.stage.dataset).replace(/\/+$/, '');
    // The pipeline reads $HPC_CACHE_ROOT/<dataset>: the cache dir must end in the dataset's name.
    if (!dir.endsWith(`/${input.stage.dataset}`))
      throw new TemplateInputError(
        `layout.cacheDirs.${input.stage.dataset}`,
        dir,
        `a directory named after the dataset (…/${input.stage.dataset})`,
      );
    return dir.slice(0, -input.stage.dataset.length - 1) || '/';
  };
  // A job that stages nothing sets HPC_CACHE_ROOT to the scratch directory of the caches.
  if (input.stage.stage === 'preprocess') {
    // The cache it builds must outlive the job (node-local $TMPDIR is deleted at job end), and
    // there is nothing to stage before it exists: write it to scratch, where later stages stage it from.
    return [
      '# preprocess builds the graph cache in scratch (never $TMPDIR, which is deleted at job end).',
      ...assignArray('hpc_stage_datasets', []),
      assign('hpc_cache_root', scratchRoot()),
    ];
  }
  if (!staging.enabled) {
    return [
      '# Staging is off for this experiment: the pipeline reads the scratch cache directly.',
      ...assignArray('hpc_stage_datasets', []),
      assign('hpc_cache_root', scratchRoot()),
    ];
  }
  const datasets = staging.datasets.length > 0 ? staging.datasets : [input.stage.dataset];
  return [
    '# P0: the dataset caches copied to node-local disk (NAME SRC_DIR pairs).',
    ...assignArray(
      'hpc_stage_datasets',
      datasets.map((ds) => [ds, cacheDirFor(ds)]),
    ),
  ];
}

function commandLines(stage: StageView, pipeline: PipelineView, multiTask: boolean): string[] {
  const r = stage.resources;
  const style = pipeline.overrideStyle;
  if (!(OVERRIDE_STYLES as readonly string[]).includes(style))
    throw new TemplateInputError('pipeline.overrideStyle', style, OVERRIDE_STYLES.join(', '));
  const overrides = Object.entries(stage.overrides).map(([key, value]) =>
    overrideWords(
      pipeline.overrideStyle,
      requireMatch(`stage.overrides key`, key, RULES.overrideKey),
      scalarText(`stage.overrides.${key}`, value),
    ),
  );
  const command = stageCommand({ command: [...pipeline.command, ...(stage.args ?? [])] }, stage);
  if (command.length === 0) throw new TemplateInputError('pipeline.command', command, 'at least one word');
  return [
    ...(multiTask
      ? ['# Several tasks: srun starts one per GPU so Lightning picks up DDP from the SLURM environment.']
      : []),
    `# The ${requireName('pipeline.name', pipeline.name)} pipeline's stage command (its declaration).`,
    ...assignArray('hpc_cmd', [
      ...(multiTask ? [['srun', '--kill-on-bad-exit=1', `--cpus-per-task=${r.cpus}`]] : []),
      command,
    ]),
    ...assignArray('hpc_overrides', overrides),
    assign('hpc_override_style', style),
  ];
}
